"""Quality at equal budget: this project's training loop vs the Hugging Face `Trainer` recipe.

Both train the same BertForMaskedLM shape from the same initial weights on the same packed
sequences (this project's tokenizer and sequences of the corpus), for the same number of steps
and batch size, and both are scored with this project's fixed evaluation protocol (identical
masks). The HF side uses `Trainer` + `DataCollatorForLanguageModeling` with the Trainer's own
defaults (what a user gets from the `run_mlm` recipe without tuning).

    python bench/compare_hf_trainer.py --corpus ../shared/corpora/gutenberg \
        --extra-eval ../shared/corpora/wikitext-2-raw/wiki.valid.raw --steps 300 --layers 4 --hidden 256

Writes a JSON line per system to stdout and to --output.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from bert_mlm.core.corpus import CorpusConfig, assign_splits, clean_documents, read_corpus
from bert_mlm.core.evaluation import EvaluationConfig, baseline_accuracy, most_frequent_token
from bert_mlm.core.experiment import Experiment
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.sequences import SequenceConfig, build_sequences
from bert_mlm.core.tokenizer import encode_documents, train_wordpiece
from bert_mlm.core.training import TrainingConfig


def prepare(corpus: str, extra: str | None, max_length: int, vocab_size: int):
    documents, _ = clean_documents(read_corpus(corpus))
    documents["split"] = assign_splits(documents["doc_hash"].tolist(), CorpusConfig().split_ratios)
    tokenizer = train_wordpiece(documents.loc[documents["split"] == "train", "text"].tolist(), vocab_size=vocab_size)
    ids = {s: encode_documents(tokenizer, documents.loc[documents["split"] == s, "text"].tolist()) for s in ("train", "valid", "test")}
    sequences = {s: build_sequences(d, "packed", max_length, tokenizer.cls_token_id, tokenizer.sep_token_id) for s, d in ids.items()}
    if extra:
        extra_docs, _ = clean_documents(read_corpus(extra), min_chars=1, deduplicate=False)
        extra_ids = encode_documents(tokenizer, extra_docs["text"].tolist())
        sequences["extra"] = build_sequences(extra_ids, "packed", max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
    return tokenizer, ids, sequences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--extra-eval")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--learning-rate", type=float, default=None, help="this project's; default: conf/base")
    parser.add_argument("--systems", default="bert-mlm,hf-trainer", help="comma-separated: bert-mlm, hf-trainer")
    parser.add_argument("--output", default="bench/results/compare_hf_trainer.jsonl")
    args = parser.parse_args()

    tokenizer, ids, sequences = prepare(args.corpus, args.extra_eval, args.max_length, args.vocab_size)
    heads = max(1, args.hidden // 64)
    experiment = Experiment(
        tokenizer=tokenizer,
        sequences=sequences,
        model_config=ModelConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=heads,
                                 intermediate_size=4 * args.hidden, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        training=TrainingConfig(max_steps=args.steps, batch_size=args.batch_size, learning_rate=args.learning_rate or "auto",
                                warmup_steps=max(1, args.steps // 10), progress=False),
        masking=MaskingConfig(),
        evaluation=EvaluationConfig(),
        sequence_config=SequenceConfig(max_length=args.max_length),
    )
    eval_sets = {name: experiment.evaluation_set(name) for name in ("test", "extra") if sequences.get(name)}
    frequent = most_frequent_token(ids["train"], experiment.token_ids.special)
    results = []

    def score(system: str, model, seconds: float, tokens: int) -> None:
        row = {"system": system, "steps": args.steps, "batch_size": args.batch_size, "layers": args.layers,
               "hidden": args.hidden, "train_seconds": seconds, "train_tokens_per_second": tokens / seconds}
        for name, evaluation_set in eval_sets.items():
            metrics = experiment.evaluate(model, evaluation_set)
            row.update({f"{name}_{k}": v for k, v in metrics.items()})
            row[f"{name}_baseline_accuracy"] = baseline_accuracy(evaluation_set, frequent)
        results.append(row)
        print(json.dumps(row), flush=True)

    systems = args.systems.split(",")
    if "bert-mlm" in systems:
        # This project: its loop and its defaults (no dropout, warmup then linear decay).
        model = experiment.new_model()
        result = experiment.train(model)
        score(f"bert-mlm (lr {result.learning_rate:g})", model, result.seconds, result.train_tokens)
    if "hf-trainer" in systems:
        train_hf(args, experiment, sequences, tokenizer, score)
    write(args.output, results)


def train_hf(args, experiment, sequences, tokenizer, score) -> None:
    # Hugging Face Trainer + DataCollatorForLanguageModeling, same initial weights and data.
    hf_model = replace(experiment, model_config=replace(experiment.model_config, hidden_dropout_prob=0.1,
                                                        attention_probs_dropout_prob=0.1)).new_model()
    train_dataset = [{"input_ids": s.tolist()} for s in sequences["train"]]
    trainer = Trainer(
        model=hf_model,
        args=TrainingArguments(
            output_dir="/tmp/hf-trainer-bench", max_steps=args.steps, per_device_train_batch_size=args.batch_size,
            report_to=[], save_strategy="no", logging_steps=50, seed=42, use_cpu=not torch.cuda.is_available(),
            dataloader_drop_last=True,
        ),
        train_dataset=train_dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, pad_to_multiple_of=8),
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    real_tokens = args.steps * args.batch_size * (sum(map(len, sequences["train"])) / len(sequences["train"]))
    score("hf-trainer", hf_model, seconds, int(real_tokens))


def write(output: str, results: list[dict]) -> None:
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as handle:
        for row in results:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
