"""A mask-rate study on Gutenberg: does a higher or a decreasing mask rate help at this scale?

    python bench/mask_rate_study.py                  # ~50 min on 2 CPU cores
    python bench/mask_rate_study.py --steps 20 --trials 2 --seeds 2 --probe-examples 300   # a smoke run

1. The study: this project's own tuning core (``run_study``, scrambled-Sobol sampler, no pruning)
   over a constant ``masking.probability``, one training seed per trial, scored like the tuning
   node scores (fixed-protocol 15 % loss on the validation split). The classic 0.15 is enqueued
   as the first trial so that the study always measures it.
2. Three settings, each trained with ``--seeds`` training seeds (the seed sets the initial weights,
   the data order and the masks; the same seed gives every setting the same initial weights):
   constant 0.15, the study's best constant, and a linear schedule (Ankner et al. 2023:
   0.30 -> 0.15 by default). A study trial is reused as that setting's first seed: same config,
   same seed, same weights (training is deterministic on CPU).
3. Every trained model, and the random-init model of each seed as a reference, is scored with
   the fixed protocol on the test split and on WikiText-2 valid (loss and accuracy, each with its
   analytic standard error), and by the SST-2 linear probe (frozen encoder, mean-pooled,
   logistic regression; dev set, accuracy +/- binomial SE).

Tables: mean +/- standard deviation over seeds, and each setting's paired difference from
constant 0.15 (same seeds, same evaluation masks) with a Student-t 95 % interval.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import optuna
import torch
from _data import Prepared, experiment, prepare
from _timing import Table, machine_info

from bert_mlm.config import EvaluationConfig, FinetuneConfig, MaskingConfig, TuningConfig
from bert_mlm.core.finetune.runs import PreparedTask, Runner, prepare_task
from bert_mlm.core.study.tuning import best_parameters, open_study, paired_interval, run_study
from bert_mlm.core.train.experiment import Experiment

CLASSIC = 0.15
METRICS = (  # (label, key, higher is better)
    ("test loss", "test_loss", False),
    ("test acc", "test_acc", True),
    ("WikiText-2 loss", "extra_loss", False),
    ("WikiText-2 acc", "extra_acc", True),
    ("SST-2 probe acc", "probe_acc", True),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--extra-eval", default="../shared/corpora/wikitext-2-raw/wiki.valid.raw")
    parser.add_argument("--probe-train", default="../shared/corpora/sst2/train.tsv")
    parser.add_argument("--probe-eval", default="../shared/corpora/sst2/dev.tsv")
    parser.add_argument("--probe-examples", type=int, default=4000, help="SST-2 training examples for the probe")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps of 32 x 128 per run")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per setting")
    parser.add_argument("--trials", type=int, default=4, help="study trials (the first is 0.15)")
    parser.add_argument("--search", default="0.10,0.50", help="the study's range of constant rates")
    parser.add_argument("--linear", default="0.30,0.15", help="start,end of the linear schedule")
    parser.add_argument("--eval-draws", type=int, default=2, help="evaluation.mask_draws on the test split")
    parser.add_argument("--extra-draws", type=int, default=1, help="evaluation.mask_draws on WikiText-2 valid")
    parser.add_argument("--out", default=None, help="results folder (default bench/results/<UTC time>-mask-rate)")
    args = parser.parse_args()
    started = time.perf_counter()
    out = Path(args.out or Path(__file__).parent / "results" / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-mask-rate")
    out.mkdir(parents=True, exist_ok=True)

    prepared = prepare(args.corpus, args.extra_eval)
    base = experiment(prepared, args.layers, args.hidden, args.steps)
    # The frozen probe is the fine-tuning evaluation's `mode: frozen` (mean-pooled vectors, logistic regression).
    probe_config = FinetuneConfig(train_path=args.probe_train, eval_path=args.probe_eval, text_column="sentence",
                                  eval_text_column="content", max_train_examples=args.probe_examples, mode="frozen",
                                  seeds=1, progress=False)
    probe_examples = prepare_task(probe_config, prepared.tokenizer, 512)
    study_runs, best_rate, study_table = run_mask_rate_study(prepared, base, args)
    low, high = map(float, args.linear.split(","))
    settings = {
        f"constant {CLASSIC:.2f}": MaskingConfig(probability=CLASSIC),
        f"constant {best_rate:.3f} (study's best)": MaskingConfig(probability=best_rate),
        f"linear {low:.2f} -> {high:.2f}": MaskingConfig(probability=low, schedule="linear", final_probability=high),
    }
    if abs(best_rate - CLASSIC) < 1e-12:  # the study kept the classic rate: two rows would be one
        del settings[f"constant {best_rate:.3f} (study's best)"]
    scores: dict[str, list[dict]] = {"random init (no training)": []}
    seeds = list(range(1, args.seeds + 1))
    for seed in seeds:
        scored = with_seed(base, seed, args)
        scores["random init (no training)"].append(
            score(scored, scored.new_model(), prepared, probe_config, probe_examples)
        )
        for name, masking in settings.items():
            model = study_runs.get((masking.probability, seed)) if masking.schedule == "constant" else None
            if model is None:
                model = scored.new_model()
                scored.train(model, masking=masking)
            scores.setdefault(name, []).append(score(scored, model, prepared, probe_config, probe_examples))
            print(f"seed {seed} {name}: {scores[name][-1]}", file=sys.stderr, flush=True)
    minutes = (time.perf_counter() - started) / 60
    tables = [study_table, results_table(scores, args, prepared, minutes), paired_table(scores, settings)]
    report = "\n".join(table.markdown() for table in tables)
    (out / "report.md").write_text(report)
    (out / "results.json").write_text(json.dumps(
        {"machine": machine_info(), "args": vars(args), "scores": scores, "best_rate": best_rate,
         "minutes": minutes, "tables": [t.data for t in tables]}, indent=2, default=str))
    print(report)
    print(f"wrote {out}", file=sys.stderr)


def with_seed(base: Experiment, seed: int, args) -> Experiment:
    return replace(base, training=base.training.replace(seed=seed),
                   evaluation=EvaluationConfig(mask_draws=args.eval_draws))


def run_mask_rate_study(prepared: Prepared, base: Experiment, args) -> tuple[dict, float, Table]:
    """The tuning core's study over a constant rate; returns the trained models by (rate, seed 1)."""
    low, high = map(float, args.search.split(","))
    workdir = Path(tempfile.mkdtemp(prefix="mask-rate-study-"))
    config = TuningConfig(n_trials=args.trials, trial_steps=args.steps, eval_every=args.steps,
                          search_space={"probability": [low, high]}, storage=f"sqlite:///{workdir}/optuna.db",
                          study_name="mask-rate-study", pruner="none", seeds=1)
    open_study(config).enqueue_trial({"probability": CLASSIC})
    experiment_seed1 = with_seed(base, 1, args)
    validation = experiment_seed1.evaluation_set("valid")
    models: dict[tuple[float, int], torch.nn.Module] = {}

    def run_trial(trial: optuna.Trial, values: dict, report) -> float:
        masking = MaskingConfig(probability=values["probability"])
        model = experiment_seed1.new_model()
        trial_started = time.perf_counter()
        experiment_seed1.train(model, masking=masking)
        loss = experiment_seed1.scores(model, validation).loss
        report(args.steps, loss)
        models[(masking.probability, 1)] = model
        print(f"trial {trial.number}: probability {masking.probability:.4f} -> valid loss {loss:.4f} "
              f"({time.perf_counter() - trial_started:.0f} s)", file=sys.stderr, flush=True)
        return loss

    study = run_study(config, run_trial)
    best_rate = float(best_parameters(study, config).masking["probability"])
    table = Table(
        f"The study: constant mask rate, {args.trials} trials, 1 seed each ({args.layers} layers x {args.hidden}, "
        f"{args.steps} steps of 32 x 128)",
        ["trial", "masking.probability", "valid loss (15 % fixed masks)"],
        notes=[f"This project's tuning core: scrambled-Sobol sampler over [{low}, {high}], trial 0 enqueued at "
               f"{CLASSIC}, no pruning. Best: {best_rate:.3f}."],
        data={"trials": [{"number": t.number, "probability": t.params["probability"], "value": t.value}
                         for t in study.trials]},
    )
    for t in sorted(study.trials, key=lambda t: t.params["probability"]):
        table.rows.append([str(t.number), f"{t.params['probability']:.3f}", f"{t.value:.4f}"])
    return models, best_rate, table


def score(
    scored: Experiment, model, prepared: Prepared, probe_config: FinetuneConfig, probe_examples: PreparedTask
) -> dict:
    test = scored.scores(model, scored.evaluation_set("test")).to_json()
    extra_experiment = replace(scored, evaluation=scored.evaluation.replace(mask_draws=1))
    extra = extra_experiment.scores(model, extra_experiment.evaluation_set("extra")).to_json()
    labels = probe_examples.evaluation.labels
    predictions = Runner.create(probe_examples, probe_config, "cpu", "fp32").run(model, "pretrained", 0).predictions
    accuracy, n = float((predictions == labels).mean()), len(labels)
    majority = probe_examples.task.label_ids[probe_examples.task.train["label"].mode().iloc[0]]
    probe = {"probe_accuracy": accuracy, "probe_accuracy_se": (accuracy * (1 - accuracy) / n) ** 0.5,
             "probe_majority_accuracy": float((labels == majority).mean()), "probe_eval_examples": n}
    return {
        "test_loss": test["eval_loss"], "test_loss_se": test["eval_loss_se"],
        "test_acc": test["eval_accuracy"], "test_acc_se": test["eval_accuracy_se"],
        "test_masked_tokens": test["eval_masked_tokens"],
        "extra_loss": extra["eval_loss"], "extra_loss_se": extra["eval_loss_se"],
        "extra_acc": extra["eval_accuracy"], "extra_acc_se": extra["eval_accuracy_se"],
        "extra_masked_tokens": extra["eval_masked_tokens"],
        "probe_acc": probe["probe_accuracy"], "probe_acc_se": probe["probe_accuracy_se"],
        "probe_majority": probe["probe_majority_accuracy"], "probe_eval_examples": probe["probe_eval_examples"],
    }


def results_table(scores: dict[str, list[dict]], args, prepared: Prepared, minutes: float) -> Table:
    table = Table(
        f"Mask rates at equal budget: {args.layers} layers x {args.hidden}, {args.steps} steps of 32 x 128, "
        f"{args.seeds} seeds",
        ["setting", *(label for label, _, _ in METRICS)],
        data={"scores": scores},
    )
    for name, runs in scores.items():
        cells = []
        for _, key, _ in METRICS:
            values = [r[key] for r in runs]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.4f} ± {spread:.4f}")
        table.rows.append([name, *cells])
    first = next(iter(scores.values()))[0]
    typical_se = {key: statistics.mean(r[f"{key}_se"] for runs in scores.values() for r in runs)
                  for _, key, _ in METRICS}
    table.notes = [
        f"Mean ± standard deviation over training seeds 1..{args.seeds}. One run's own standard error "
        f"(analytic, sequences as clusters; binomial for the probe), averaged: "
        f"test loss {typical_se['test_loss']:.4f}, "
        f"test acc {typical_se['test_acc']:.4f}, WikiText-2 loss {typical_se['extra_loss']:.4f}, WikiText-2 acc "
        f"{typical_se['extra_acc']:.4f}, probe acc {typical_se['probe_acc']:.4f}.",
        f"Fixed protocol (15 % masks, evaluation seed 20231): test split {first['test_masked_tokens']:,} masked tokens "
        f"({args.eval_draws} draws), WikiText-2 valid {first['extra_masked_tokens']:,} ({args.extra_draws} draw). "
        f"Probe: SST-2, {args.probe_examples:,} training sentences, {first['probe_eval_examples']} dev sentences, "
        f"majority class {first['probe_majority']:.3f}. Vocabulary {len(prepared.tokenizer):,} (trained on the "
        f"train split), lr 0.001 with 10 % warmup and linear decay, no dropout. Whole study: {minutes:.0f} min.",
    ]
    return table


def paired_table(scores: dict[str, list[dict]], settings: dict[str, MaskingConfig]) -> Table:
    reference = next(iter(settings))
    table = Table(
        f"Paired differences from {reference} (same seeds, same evaluation masks; 95 % interval)",
        ["setting", *(label for label, _, _ in METRICS)],
    )
    for name in list(settings)[1:]:
        cells = []
        for _, key, higher in METRICS:
            interval = paired_interval([r[key] - c[key] for r, c in zip(scores[name], scores[reference], strict=True)])
            better = interval["low"] > 0 if higher else interval["high"] < 0
            worse = interval["high"] < 0 if higher else interval["low"] > 0
            verdict = " (better)" if better else " (worse)" if worse else ""
            cells.append(f"{interval['mean']:+.4f} [{interval['low']:+.4f}, {interval['high']:+.4f}]{verdict}")
        table.rows.append([name, *cells])
        table.data[name] = cells
    table.notes = ["A difference is called better or worse only when its interval excludes zero."]
    return table


if __name__ == "__main__":
    main()
