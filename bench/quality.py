"""Quality at equal budget: this project's training loop vs Hugging Face `Trainer` +
`DataCollatorForLanguageModeling`, the same number of training tokens.

    python bench/quality.py --corpus ../shared/corpora/gutenberg \
        --extra-eval ../shared/corpora/wikitext-2-raw/wiki.valid.raw --steps 300 --layers 4 --hidden 256

Both train the same BertForMaskedLM shape from the same initial weights on the same packed
sequences for the same steps and batch, and are scored with this project's fixed evaluation
protocol (identical masks) on the corpus's test split and on the extra corpus. The HF side gets
this project's hyperparameters (learning rate, warmup, schedule, AdamW settings, clipping), so
that the comparison is of the implementations; `--hf-defaults` adds a row with the Trainer's own
defaults (lr 5e-5, no warmup), what a user of the recipe gets without tuning.
"""

from __future__ import annotations

import argparse
import time

from _data import Prepared, experiment, prepare
from _hf import train_with_hf_trainer
from _timing import Table

from bert_mlm.core.evaluate.protocol import baseline_accuracy, most_frequent_token


def run(prepared: Prepared, steps: int = 300, layers: int = 4, hidden: int = 256, hf_defaults: bool = False) -> Table:
    setup = experiment(prepared, layers, hidden, steps)
    eval_sets = {name: setup.evaluation_set(name) for name in ("test", "extra") if prepared.sequences.get(name)}
    frequent = most_frequent_token(prepared.token_ids["train"], setup.token_ids.special)
    rows = []

    def score(system: str, model, seconds: float, tokens: int) -> None:
        row = {"system": system, "train_seconds": seconds, "train_tokens": tokens}
        for name, evaluation_set in eval_sets.items():
            row.update({f"{name}_{k}": v for k, v in setup.scores(model, evaluation_set).to_json().items()})
            row[f"{name}_baseline_accuracy"] = baseline_accuracy(evaluation_set, frequent)
        rows.append(row)

    model = setup.new_model()
    started = time.perf_counter()  # wall time around the whole call, as for the Trainer
    result = setup.train(model)
    score("bert-mlm", model, time.perf_counter() - started, result.train_tokens)
    model = setup.new_model()
    _, tokens, seconds = train_with_hf_trainer(model, prepared.sequences["train"], prepared.tokenizer, setup.training)
    score("HF Trainer + collator, same hyperparameters", model, seconds, sum(tokens[:steps]))
    if hf_defaults:
        model = setup.new_model()
        _, tokens, seconds = train_with_hf_trainer(
            model, prepared.sequences["train"], prepared.tokenizer, setup.training, hf_defaults=True
        )
        score("HF Trainer + collator, its defaults (lr 5e-5)", model, seconds, sum(tokens[:steps]))

    extra = "extra" in eval_sets
    header = ["system", "train tokens", "train min", "test loss", "test acc", "test top-5"]
    header += ["extra loss", "extra acc"] if extra else []
    table = Table(
        f"Quality at equal budget: {layers} layers x {hidden} hidden, {steps} steps of 32 x {prepared.max_length}",
        header,
        notes=[
            f"lr {result.learning_rate:g} (`auto`), warmup {setup.training.warmup_steps}, linear decay, no dropout, "
            "both from the same initial weights. Fixed-protocol evaluation (15 % masks, seed 1234). "
            f"Most-frequent-token reference accuracy: test {rows[0]['test_baseline_accuracy']:.4f}"
            + (f", extra {rows[0]['extra_baseline_accuracy']:.4f} (extra = the --extra-eval corpus)." if extra else ".")
        ],
        data={"rows": rows},
    )
    for row in rows:
        cells = [
            row["system"],
            f"{row['train_tokens']:,}",
            f"{row['train_seconds'] / 60:.1f}",
            f"{row['test_eval_loss']:.3f}",
            f"{row['test_eval_accuracy']:.4f}",
            f"{row['test_eval_top5_accuracy']:.4f}",
        ]
        if extra:
            cells += [f"{row['extra_eval_loss']:.3f}", f"{row['extra_eval_accuracy']:.4f}"]
        table.rows.append(cells)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--extra-eval", default="../shared/corpora/wikitext-2-raw/wiki.valid.raw")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--hf-defaults", action="store_true")
    args = parser.parse_args()
    prepared = prepare(args.corpus, args.extra_eval)
    print(run(prepared, args.steps, args.layers, args.hidden, args.hf_defaults).markdown())


if __name__ == "__main__":
    main()
