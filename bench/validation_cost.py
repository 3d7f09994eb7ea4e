"""What validation during training costs: `kedro run` of the benchmark configuration (Gutenberg,
4 layers x 256, 32 x 128 tokens a step, no tuning) with ``training.eval_every`` and the default
``training.eval_masked_tokens``, in a fresh scratch project. Reported from the run's own history:
the median training step, the median validation (both in seconds), one validation in training
steps, the share of validation in training + validation time, and the share any other
``eval_every`` gives (validation / (validation + eval_every x step)). With ``--compare`` the
same run without validation first, for its training throughput beside.

    python bench/validation_cost.py                       # eval_every 25, 100 steps
    python bench/validation_cost.py --compare --steps 200
"""

from __future__ import annotations

import argparse
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from _project import ROOT, kedro_run_in

from bert_mlm.scratch import scratch_project

SHARES_FOR = (10, 25, 50, 100, 200, 1000)


def arguments(corpus: Path, steps: int, eval_every: int, budget: int | None) -> list[str]:
    params = {
        "corpus.path": corpus.resolve(), "model.num_hidden_layers": 4, "model.hidden_size": 256,
        "model.num_attention_heads": 4, "model.intermediate_size": 1024, "training.max_steps": steps,
        "training.batch_size": 32, "tuning.n_trials": 0, "training.checkpoint_every": 0,
        "training.eval_every": eval_every,
    }
    if budget:
        params["training.eval_masked_tokens"] = budget
    return ["--params", ",".join(f"{key}={value}" for key, value in params.items())]


def run(scratch: str, name: str, argv: list[str]) -> tuple[dict, pd.DataFrame]:
    parent = Path(scratch) / name
    parent.mkdir()
    project = scratch_project(str(parent), ROOT)
    measured = kedro_run_in(project, argv)
    folder = project / "data" / "07_model_output" / "training_history.csv"
    history = pd.read_csv(sorted(folder.iterdir())[-1] / folder.name)
    return measured, history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpora" / "gutenberg")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--budget", type=int, default=None, help="training.eval_masked_tokens (default: conf/base)")
    parser.add_argument("--compare", action="store_true", help="the same run without validation first")
    args = parser.parse_args()
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bert-mlm-validation-") as scratch:
        if args.compare:
            _, plain = run(scratch, "plain", arguments(args.corpus, args.steps, 0, args.budget))
            print(f"without validation: median step {plain['seconds'].median():.3f} s, "
                  f"{plain['tokens_per_second'].median():,.0f} tokens/s", flush=True)
        measured, history = run(scratch, "validated", arguments(args.corpus, args.steps, args.eval_every, args.budget))
    validated = history.dropna(subset=["valid_loss"])
    step, validation = history["seconds"].median(), validated["valid_seconds"].median()
    share = validated["valid_seconds"].sum() / (validated["valid_seconds"].sum() + history["seconds"].sum())
    print(f"with validation every {args.eval_every}: median step {step:.3f} s "
          f"({history['tokens_per_second'].median():,.0f} tokens/s), median validation {validation:.2f} s on "
          f"{int(validated['valid_masked_tokens'].iloc[-1]):,} masked tokens = {validation / step:.2f} training steps; "
          f"{len(validated)} validations took {share:.1%} of training + validation time")
    losses = zip(validated["step"], validated["valid_loss"], strict=True)
    print("valid loss by step: " + ", ".join(f"{int(step)}: {loss:.3f}" for step, loss in losses))
    print("eval_every -> validation share: " + ", ".join(
        f"{every}: {validation / (validation + every * step):.1%}" for every in SHARES_FOR))
    print(f"the run: {measured['seconds']:.0f} s")


if __name__ == "__main__":
    main()
