"""What the evaluation costs beside the training it judges: `kedro run` of the benchmark
configuration (Gutenberg, 4 layers x 256, 300 steps of 32 x 128, WikiText-2 valid as the extra
evaluation corpus, no tuning) in a fresh scratch project; the times of `train_masked_lm` and
`evaluate_masked_lm` (NodeTimingHook) and what the metrics rest on. With `--baseline REF`, the same
run of an earlier commit (its files, from `git archive`) first.

    python bench/evaluation_cost.py
    python bench/evaluation_cost.py --baseline bb44609
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from _project import ROOT, kedro_run_in
from _timing import Table

from bert_mlm.scratch import scratch_project


def benchmark_arguments(corpus: Path, extra: Path, steps: int) -> list[str]:
    params = {
        "corpus.path": corpus.resolve(), "evaluation.corpus_path": extra.resolve(),
        "model.num_hidden_layers": 4, "model.hidden_size": 256, "model.num_attention_heads": 4,
        "model.intermediate_size": 1024, "training.max_steps": steps, "training.batch_size": 32,
        "tuning.n_trials": 0,
    }
    return ["--params", ",".join(f"{key}={value}" for key, value in params.items())]


def measure(source: Path, arguments: list[str], scratch: str, name: str) -> list[str]:
    parent = Path(scratch) / name
    parent.mkdir()
    measured = kedro_run_in(scratch_project(str(parent), source), arguments, source)
    seconds = {node["node"]: node["seconds"] for node in measured["nodes"]}
    train, evaluate = seconds["train_masked_lm"], seconds["evaluate_masked_lm"]
    m = measured["metrics"] or {}

    def rested_on(prefix: str) -> str:
        draws = m.get(f"{prefix}eval_mask_draws", "all")
        return f"{m.get(f'{prefix}eval_masked_tokens', 0):,} / {draws}"

    return [name, f"{train:.1f}", f"{evaluate:.1f}", f"{evaluate / train:.1%}", rested_on(""), rested_on("extra_"),
            f"{m.get('eval_loss', float('nan')):.3f} ± {m.get('eval_loss_se', float('nan')):.3f}",
            f"{m.get('extra_eval_loss', float('nan')):.3f} ± {m.get('extra_eval_loss_se', float('nan')):.3f}",
            f"{measured['seconds']:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpora" / "gutenberg")
    parser.add_argument("--extra-eval", type=Path,
                        default=ROOT.parent / "shared" / "corpora" / "wikitext-2-raw" / "wiki.valid.raw")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--baseline", default="", help="an earlier commit to measure first (before/after)")
    parser.add_argument("--baseline-only", action="store_true", help="measure only --baseline")
    args = parser.parse_args()
    arguments = benchmark_arguments(args.corpus, args.extra_eval, args.steps)
    table = Table(f"Evaluation cost beside training ({datetime.now(timezone.utc):%Y-%m-%d})",
                  ["system", "train_masked_lm s", "evaluate_masked_lm s", "eval / train",
                   "test: masked tokens / draws", "extra: masked tokens / draws", "test loss ± SE", "extra loss ± SE",
                   "wall s"])
    with tempfile.TemporaryDirectory(prefix="bert-mlm-eval-cost-") as scratch:
        if args.baseline:
            source = Path(scratch) / "baseline-source"
            source.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline], check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
            table.rows.append(measure(source, arguments, scratch, args.baseline))
            print(table.rows[-1], flush=True)
        if not args.baseline_only:
            table.rows.append(measure(ROOT, arguments, scratch, "this checkout"))
    table.notes = [f"`kedro run {' '.join(arguments)}` in a fresh scratch project per row; node times from "
                   "NodeTimingHook (without catalog I/O)."]
    print(table.markdown())


if __name__ == "__main__":
    main()
