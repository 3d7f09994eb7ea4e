"""Span masking (whole-word n-grams, geometric spans) against whole-word and token-level masking:
what it costs per batch against a training step, and what it does to the fixed-protocol loss at
equal budget, on English (Gutenberg, WordPiece words) and Chinese (ChnSentiCorp reviews, jieba
words).

    python bench/span_masking.py --steps 300 --seeds 3
    python bench/span_masking.py --steps 300 --finetune-only     # the fine-tuning gains (Chinese) alone

Cost: the per-batch data path (collate + mask) of each scheme, alternating, medians, set beside one
training step of the default 2 x 128 model and of the 4 x 256 benchmark model (32 x 128 tokens),
timed in the same process (the issue's rule: batch assembly under 5 % of a step on CPU). Quality:
the same model, initial weights, data, steps and batch trained with each scheme (several seeds),
each scored on the test split with the token-level fixed protocol (the same masks for every scheme)
and the whole-word one. Fine-tuning (Chinese): the first seed's model of each scheme fine-tuned on
MSRA NER and ChnSentiCorp sentiment (500 labelled examples, 3 fine-tuning seeds, the same batches
for every model: the token-classification bench's protocol), each paired against token masking's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _timing import Table, alternate, median
from token_classification import ner_config
from whole_word import MAX_LENGTH, Corpus, prepare

from bert_mlm.config import EvaluationConfig, FinetuneConfig, MaskingConfig, ModelConfig, SequenceConfig, TrainingConfig
from bert_mlm.core.evaluate.protocol import evaluate, prepare_evaluation_set
from bert_mlm.core.finetune.result import PRETRAINED
from bert_mlm.core.finetune.runs import evaluate_finetuning, prepare_task
from bert_mlm.core.model.masking import mask_generator, mask_tokens
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.train.experiment import Experiment

SCHEMES = {
    "token": MaskingConfig(),
    "whole-word": MaskingConfig(whole_word=True),
    "n-gram (MacBERT 1-4)": MaskingConfig(span="ngram"),
    "geometric (SpanBERT p=0.2, <= 10)": MaskingConfig(span="geometric"),
}


def experiment(corpus: Corpus, layers: int, hidden: int, steps: int, seed: int = 1) -> Experiment:
    return Experiment(
        tokenizer=corpus.tokenizer,
        sequences=corpus.sequences,
        model_config=ModelConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=max(2, hidden // 64),
                                 intermediate_size=4 * hidden, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0),
        training=TrainingConfig(max_steps=steps, batch_size=32, warmup_steps=max(1, steps // 10), progress=False,
                                seed=seed),
        masking=MaskingConfig(),
        evaluation=EvaluationConfig(mask_draws=1),
        sequence_config=SequenceConfig(max_length=MAX_LENGTH),
    )


def cost(corpus: Corpus, repeats: int, batches: int = 50, batch_size: int = 32) -> Table:
    ids = TokenIds.from_tokenizer(corpus.tokenizer)
    train = corpus.sequences["train"]
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(train), batch_size, replace=False) for _ in range(batches)]

    def assembly(masking: MaskingConfig):
        collator = ids.collator(MAX_LENGTH, whole_word=masking.words)

        def run() -> None:
            for k, pick in enumerate(picks):
                batch = collator.collate(train, pick)
                mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement, masking,
                            mask_generator(0, 0, k), batch.get("word_starts"))
        return run

    def step(layers: int, hidden: int):
        setup = experiment(corpus, layers, hidden, steps=4)
        def run() -> None:
            setup.train(setup.new_model(), setup.training, MaskingConfig())
        return run

    seconds = alternate({name: assembly(masking) for name, masking in SCHEMES.items()}, repeats)
    steps = alternate({"2 x 128": step(2, 128), "4 x 256": step(4, 256)}, max(2, repeats // 2))
    step_seconds = {name: median(values) / 4 for name, values in steps.items()}  # 4 steps, set-up included
    table = Table(f"Span masking cost per batch: {corpus.name}",
                  ["scheme", "ms per batch (collate + mask)", "share of a 2 x 128 step", "share of a 4 x 256 step"])
    for name, values in seconds.items():
        per_batch = median(values) / batches
        table.rows.append([name, f"{1000 * per_batch:.2f}", f"{per_batch / step_seconds['2 x 128']:.1%}",
                           f"{per_batch / step_seconds['4 x 256']:.1%}"])
    table.notes = [f"{batches} batches of {batch_size} packed sequences of {MAX_LENGTH}, {repeats} alternating "
                   f"repeats, medians; a training step (forward, backward, AdamW; model set-up included, so an "
                   f"upper bound) {1000 * step_seconds['2 x 128']:.0f} ms (2 x 128) and "
                   f"{1000 * step_seconds['4 x 256']:.0f} ms (4 x 256), {torch.get_num_threads()} thread(s)"]
    return table


_TRAINED: dict = {}  # (corpus, scheme, steps, seed) -> model: the quality table's seed-1 models are fine-tuned


def trained(corpus: Corpus, steps: int, seed: int, name: str):
    """The 2 x 128 model trained ``steps`` steps with scheme ``name`` (once per process)."""
    key = (corpus.name, name, steps, seed)
    if key not in _TRAINED:
        setup = experiment(corpus, 2, 128, steps, seed)
        model = setup.new_model()
        setup.train(model, setup.training, SCHEMES[name])
        _TRAINED[key] = model
    return _TRAINED[key]


def finetune_gains(corpus: Corpus, steps: int, seeds: int = 3) -> Table:
    """Each scheme's seed-1 model fine-tuned on NER and on sentiment, paired against token masking's."""
    tasks = {"MSRA NER": ner_config(500, 1000, seeds),
             "ChnSentiCorp sentiment": FinetuneConfig(
                 train_path=str(corpus.path), text_column="review", max_train_examples=500, max_eval_examples=872,
                 max_length=64, seeds=seeds, progress=False)}
    models = {name: trained(corpus, steps, 1, name) for name in SCHEMES}
    table = Table(f"Masking schemes fine-tuned: {corpus.name}",
                  ["task (metric)", "training masking", "score", "gain over token masking (points) [95 % CI]"])
    for task, config in tasks.items():
        prepared = prepare_task(config, corpus.tokenizer, 512)
        runs = {name: evaluate_finetuning(model, corpus.tokenizer, config, prepared=prepared, device="cpu")
                for name, model in models.items()}
        token = runs["token"].scores[PRETRAINED]
        for name, result in runs.items():
            paired = replace(result, scores={PRETRAINED: result.scores[PRETRAINED], "baseline": token},
                             baselines={"baseline": "token masking"}).task_result()
            gain = "" if name == "token" else (f"{100 * paired.gain.mean:+.1f} [{100 * paired.gain.low:+.1f}, "
                                               f"{100 * paired.gain.high:+.1f}]")
            table.rows.append([f"{task} ({paired.metric.replace('_', ' ')})", name, f"{paired.score.mean:.3f}", gain])
            print(table.rows[-1], file=sys.stderr, flush=True)
    table.notes = [f"2 layers x 128 hidden pretrained {steps} steps (seed 1) with each scheme; 500 labelled examples, "
                   f"{seeds} fine-tuning seeds (LP-FT head, lr auto, 3 epochs), the same batches for every model; "
                   "gains paired with token masking's runs (NER: paired bootstrap over sentences with the seeds' "
                   "spread; sentiment: seeds and examples)"]
    return table


def quality(corpus: Corpus, steps: int, seeds: int, schemes: dict[str, MaskingConfig] = SCHEMES) -> Table:
    base = experiment(corpus, 2, 128, steps)
    ids = base.token_ids
    protocols = {
        "token": prepare_evaluation_set(corpus.sequences["test"], ids.collator(MAX_LENGTH), ids.mask, ids.replacement,
                                        EvaluationConfig(mask_draws=1)),
        "whole-word": prepare_evaluation_set(corpus.sequences["test"], ids.collator(MAX_LENGTH), ids.mask,
                                             ids.replacement, EvaluationConfig(whole_word=True, mask_draws=1)),
    }
    rows = []
    for seed in range(1, seeds + 1):
        for name in schemes:  # SCHEMES' names (their configurations)
            started = time.perf_counter()
            model = trained(corpus, steps, seed, name)
            row = {"scheme": name, "seed": seed, "seconds": time.perf_counter() - started}
            for protocol, evaluation_set in protocols.items():
                scores = evaluate(model, evaluation_set, 64)
                row[f"{protocol}_loss"], row[f"{protocol}_accuracy"] = scores["eval_loss"], scores["eval_accuracy"]
            rows.append(row)
            print(corpus.name, row, file=sys.stderr, flush=True)

    def cell(name: str, key: str) -> str:
        values = [row[key] for row in rows if row["scheme"] == name]
        spread = f" ± {statistics.stdev(values):.4f}" if len(values) > 1 else ""
        return f"{statistics.mean(values):.4f}{spread}"

    table = Table(f"Masking schemes at equal budget: {corpus.name}",
                  ["training masking", "token protocol: loss", "token protocol: acc", "whole-word protocol: loss",
                   "whole-word protocol: acc"])
    for name in schemes:
        table.rows.append([name, *(cell(name, f"{p}_{m}") for p in protocols for m in ("loss", "accuracy"))])
    table.notes = [f"2 layers x 128 hidden, {steps} steps of 32 x {MAX_LENGTH}, {corpus.segmenter} words, 15 % "
                   f"masked; mean ± standard deviation over training seeds 1..{seeds} (the same initial weights and "
                   "data order per seed for every scheme); test split, fixed masks (every scheme scored on the same)"]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default="../shared")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--finetune-only", action="store_true", help="the Chinese fine-tuning gains alone")
    args = parser.parse_args()
    shared = Path(args.shared)
    with tempfile.TemporaryDirectory() as workdir:
        reviews = shared / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv"
        chinese = prepare("ChnSentiCorp (Chinese reviews)", str(reviews), "review", 8192, Path(workdir))
        chinese.path = reviews
        if args.finetune_only:
            print(finetune_gains(chinese, args.steps).markdown(), flush=True)
            return
        corpora = [prepare("Gutenberg (English)", str(shared / "corpora" / "gutenberg"), "text", 8192, Path(workdir)),
                   chinese]
        for corpus in corpora:
            print(cost(corpus, args.repeats).markdown(), flush=True)
        if not args.skip_quality:
            for corpus in corpora:
                print(quality(corpus, args.steps, args.seeds).markdown(), flush=True)
            print(finetune_gains(chinese, args.steps).markdown(), flush=True)


if __name__ == "__main__":
    main()
