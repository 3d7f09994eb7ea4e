"""Named-entity recognition as the judge of pretraining: entity F1 and its paired gain on MSRA NER,
set beside the sentence task (ChnSentiCorp sentiment) for the same pairs of models.

    python bench/token_classification.py --workdir /tmp/ner            # ~1-2 h on 2 cores
    python bench/token_classification.py --workdir /tmp/ner --report   # the tables of the saved results
    python bench/token_classification.py --workdir /tmp/ner-tiny --tiny

With this project's core library (what the nodes call), reusing ``bench/continued_pretraining.py``'s
Chinese setup (a ``--workdir`` of that bench is shared: its models are not trained again):

1. **Models**: a general 4 x 256 model trained from scratch on the MSRA news sentences (``news.txt``),
   that model continued on the ChnSentiCorp reviews at each learning rate of ``--learning-rates``
   (100 steps, 10 % warmup; ``1e-4`` is the continuing default, 0.1 x the from-scratch rate), and a
   random initialisation of the same shape (the general model's own initial weights).
2. **Tasks**: MSRA NER (``ner_train.conll``; a hash split: ``--eval`` sentences held out, ``--sizes``
   training sentences sampled from the rest; strict IOB2 entity F1) and ChnSentiCorp sentiment (the
   continued-pretraining bench's split: 500 training reviews, 872 held out; accuracy). Each model is
   fine-tuned once per task and size with ``--seeds`` seeds (the finetune pipeline's protocol: LP-FT
   head, lr auto, 3 epochs, the same batches for every model of a seed); pairs are formed from those
   runs: the paired gain with its 95 % interval (NER: a paired bootstrap over sentences with the
   seeds' spread; sentiment: seeds and eval examples, Welch-Satterthwaite).
3. **Separation**: for each pair, the gain over its interval's half-width: above 1, the interval
   excludes zero.

Every model's predictions are saved under ``--workdir/ner`` (a rerun after a crash skips what is
done); ``--report`` prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _timing import machine_info
from continued_pretraining import LANGUAGES, MODEL, SHARED, Case

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.finetune.result import PRETRAINED, FinetuneRuns, ModelScores
from bert_mlm.core.finetune.runs import evaluate_finetuning, prepare_task
from bert_mlm.core.model.bert import build_model, load_for_continued_pretraining

NER = SHARED / "msra-ner" / "ner_train.conll"
CONTINUING_DEFAULT = 1e-4


def ner_config(size: int, evaluation: int, seeds: int) -> FinetuneConfig:
    return FinetuneConfig(train_path=str(NER), task="token", max_train_examples=size, max_eval_examples=evaluation,
                          eval_fraction=0.1, seeds=seeds, progress=False)


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.case = Case(LANGUAGES["zh"], args)  # the general model, the continued runs, the sentiment task
        self.out = args.workdir / "ner"
        self.out.mkdir(parents=True, exist_ok=True)
        self.tokenizer = self.case.tokenizer
        self.prepared = {}

    def model(self, name: str):
        if name == "general":
            return load_for_continued_pretraining(self.case.directory, self.tokenizer)
        if name == "random":  # the general model's own initial weights (core.model.bert.build_model, seed 42)
            return build_model(MODEL, self.tokenizer, seed=42)
        self.case.continued(float(name.removeprefix("lr")), 0.1)  # trained (or loaded) by the shared bench
        return load_for_continued_pretraining(self.case.out / "models" / f"{name}-warmup0.1", self.tokenizer)

    def task(self, task: str, size: int) -> tuple[FinetuneConfig, object]:
        config = (ner_config(size, self.args.eval, self.args.seeds) if task == "ner"
                  else self.case.task.replace(seeds=self.args.seeds))
        if (task, size) not in self.prepared:
            self.prepared[task, size] = prepare_task(config, self.tokenizer, 512)
        return config, self.prepared[task, size]

    def runs(self, model: str, task: str, size: int) -> FinetuneRuns:
        """``model`` fine-tuned on the task with every seed (its predictions saved, and loaded on a rerun)."""
        config, prepared = self.task(task, size)
        path = self.out / f"{task}-{size}-{model}.npz"
        if not path.exists():
            started = time.perf_counter()
            runs = evaluate_finetuning(self.model(model), self.tokenizer, config, prepared=prepared, device="cpu")
            seconds = time.perf_counter() - started
            np.savez(path, predictions=runs.scores[PRETRAINED].predictions, seconds=seconds)
            print(f"{task} {size} {model}: {seconds:.0f} s ({seconds / config.seeds:.0f} s a seed)", flush=True)
        saved = np.load(path)
        return FinetuneRuns(prepared, config, {PRETRAINED: ModelScores(saved["predictions"])}, {},
                            float(saved["seconds"]))

    def pair(self, model: str, baseline: str, task: str, size: int) -> dict:
        first, second = self.runs(model, task, size), self.runs(baseline, task, size)
        result = replace(first, scores={PRETRAINED: first.scores[PRETRAINED], "baseline": second.scores[PRETRAINED]},
                         baselines={"baseline": baseline}).task_result()
        gain, score = result.gain, result.score
        half = (gain.high - gain.low) / 2
        return {"task": task, "size": size, "model": model, "baseline": baseline, "metric": result.metric,
                "model_score": score.mean, "baseline_score": result.baseline_score.mean, "gain": gain.mean,
                "low": gain.low, "high": gain.high, "half_width": half,
                "separation": abs(gain.mean) / half if half else float("inf"),
                "seconds_per_seed": (first.seconds + second.seconds) / 2 / self.args.seeds}


def run(args) -> list[dict]:
    bench = Bench(args)
    continued = f"lr{CONTINUING_DEFAULT:g}"
    rows = []
    # Pretraining judged by each task: the general model against random weights, the continued model against
    # its starting point (and against random weights).
    for task, sizes in (("ner", args.sizes), ("sentiment", [args.sentiment_size])):
        for size in sizes:
            for model, baseline in (("general", "random"), (continued, "general"), (continued, "random")):
                rows.append(bench.pair(model, baseline, task, size))
                print(json.dumps(rows[-1]), flush=True)
    # The continued-pretraining learning-rate sweep judged by NER (the smaller size: the gain a user sees
    # on few labelled sentences).
    for rate in args.learning_rates:
        rows.append({**bench.pair(f"lr{rate:g}", "general", "ner", args.sizes[0]), "sweep": True})
        print(json.dumps(rows[-1]), flush=True)
    (args.workdir / "ner" / "pairs.json").write_text(json.dumps(rows, indent=1))
    return rows


def report(rows: list[dict], args) -> str:
    def points(value: float) -> str:
        return f"{100 * value:+.1f}"

    lines = ["| task (metric) | training examples | model | against | model's score | baseline's | gain (points) "
             "[95 % CI] | gain / half-width |", "|---|---|---|---|---|---|---|---|"]
    for row in (row for row in rows if not row.get("sweep")):
        lines.append(f"| {row['task']} ({row['metric'].replace('_', ' ')}) | {row['size']:,} | {row['model']} | "
                     f"{row['baseline']} | {row['model_score']:.3f} | {row['baseline_score']:.3f} | "
                     f"{points(row['gain'])} [{points(row['low'])}, {points(row['high'])}] | {row['separation']:.2f} |")
    lines += ["", "| continued at learning rate | NER entity F1 | general model's | gain (points) [95 % CI] | "
                  "separates |", "|---|---|---|---|---|"]
    for row in (row for row in rows if row.get("sweep")):
        lines.append(f"| {row['model'].removeprefix('lr')} | {row['model_score']:.3f} | {row['baseline_score']:.3f} | "
                     f"{points(row['gain'])} [{points(row['low'])}, {points(row['high'])}] | "
                     f"{'yes' if row['low'] > 0 or row['high'] < 0 else 'no'} |")
    lines += ["", "Seconds a seed (one model's fine-tuning and evaluation, the mean of the pair's two): "
              + "; ".join(f"{row['task']} at {row['size']:,}: {row['seconds_per_seed']:.0f} s"
                          for row in rows if not row.get("sweep") and row["baseline"] == "random"
                          and row["model"] == "general"), f"Machine: {json.dumps(machine_info())}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--sizes", default="500,2000", help="NER training sentences")
    parser.add_argument("--eval", type=int, default=1000, help="NER eval sentences (of a 10 % hash split)")
    parser.add_argument("--sentiment-size", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--learning-rates", default="2e-3,1e-3,5e-4,1e-4,5e-5")
    parser.add_argument("--general-steps", type=int, default=500)
    parser.add_argument("--steps", type=int, default=100, help="steps of continued pretraining")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="a dry run: small data, few steps")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    args.sizes = [int(size) for size in args.sizes.split(",")]
    args.learning_rates = [float(rate) for rate in args.learning_rates.split(",")]
    # What the shared Case reads (bench/continued_pretraining.py's options).
    args.finetune_train, args.finetune_eval = args.sentiment_size, 872  # (--tiny: smaller below)
    args.finetune_seeds, args.finetune_length = args.seeds, 64
    if args.tiny:
        args.general_steps, args.steps, args.sizes, args.eval, args.seeds = 20, 5, [60, 120], 100, 2
        args.learning_rates, args.finetune_train, args.finetune_eval = [1e-3, 1e-4], 60, 100
        args.sentiment_size = 60
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    pairs = args.workdir / "ner" / "pairs.json"
    rows = json.loads(pairs.read_text()) if args.report else run(args)
    print(report(rows, args))


if __name__ == "__main__":
    main()
