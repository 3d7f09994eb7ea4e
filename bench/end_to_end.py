"""End to end: `kedro run` of the default chain (built-in corpus, conf/base) in a fresh scratch
copy of the project (new data/, new tuning study), wall time per node and per stage against the
plan's estimate; with `--repeats N`, N fresh runs and their median; with `--baseline REF`, the same
run of an earlier commit (a git worktree), alternating, for a before/after comparison.

    python bench/end_to_end.py --repeats 3          # the quick start's promise: median pipeline time
    python bench/end_to_end.py --baseline ef0a54d --repeats 1

`/proc/loadavg` is recorded beside each run: a busy machine slows every stage.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from _project import ROOT, kedro_run, kedro_run_in
from _timing import Table, median

from bert_mlm.pipeline_registry import CHAIN
from bert_mlm.scratch import scratch_project


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def stage_seconds(measured: dict) -> dict[str, float]:
    """Each registered stage's seconds (its nodes' time with catalog I/O) in one run."""
    from kedro.framework.project import pipelines

    from bert_mlm.pipeline_registry import register_pipelines

    registry = pipelines if len(pipelines) else register_pipelines()
    seconds = {}
    for node in measured["nodes"]:
        stage = next(name for name in CHAIN if node["node"] in {n.name for n in registry[name].nodes})
        seconds[stage] = seconds.get(stage, 0.0) + node["seconds_with_io"]
    return seconds


def run(extra_arguments: list[str] | None = None, repeats: int = 1) -> Table:
    nan = float("nan")
    runs = []
    for repeat in range(repeats):
        before = load()
        measured = kedro_run(list(extra_arguments or []))
        measured["load"] = (before, load())
        runs.append(measured)
        ratio = (measured["metrics"] or {}).get("accuracy_over_baseline", nan)
        planned = (measured["plan"] or {}).get("seconds") or nan
        print(f"run {repeat + 1}: {measured['seconds']:.1f} s wall, {measured['pipeline_seconds']:.1f} s in the "
              f"pipeline (plan ~{planned:.0f} s), {ratio:.2f}x the reference, load {before} -> {load()}", flush=True)
    pipeline = [r["pipeline_seconds"] for r in runs]
    middle = sorted(runs, key=lambda r: r["pipeline_seconds"])[len(runs) // 2]
    plan = middle["plan"] or {}
    table = Table("End to end: `kedro run` (default chain, built-in corpus)",
                  ["stage", "seconds (median run)", "share", "the plan's estimate"])
    total, stages = middle["pipeline_seconds"], stage_seconds(middle)
    for stage, seconds in stages.items():
        estimate = (plan.get("stages") or {}).get(stage)
        table.rows.append([stage, f"{seconds:.1f}", f"{seconds / total:.0%}",
                           "" if estimate is None else f"{estimate:.1f}"])
    rest = total - sum(stages.values())
    table.rows.append(["Kedro, hooks (the plan's measurement included), the rest", f"{rest:.1f}",
                       f"{rest / total:.0%}", ""])
    planned = plan.get("seconds")
    table.rows.append(["**pipeline**", f"**{total:.1f}**", "100%", "" if planned is None else f"{planned:.1f}"])
    metrics = middle["metrics"] or {}
    ratios = ", ".join(f"{(r['metrics'] or {}).get('accuracy_over_baseline', nan):.2f}x" for r in runs)
    loads = "; ".join(f"{a} -> {b}" for a, b in (r["load"] for r in runs))
    table.notes = [
        f"Pipeline seconds of {repeats} fresh run(s): {', '.join(f'{p:.1f}' for p in pipeline)}; median "
        f"**{median(pipeline):.1f} s**; wall (Kedro's start-up included) median "
        f"{median([r['seconds'] for r in runs]):.1f} s. /proc/loadavg (1, 5, 15 min) before and after each run: "
        f"{loads}. The plan measured a training step at {plan.get('step_seconds') or nan:.3f} s in "
        f"{plan.get('calibration_seconds') or nan:.2f} s.",
        f"Peak RSS {middle['peak_rss_gb']:.2f} GB. Eval accuracy {metrics.get('eval_accuracy', nan):.4f} vs the "
        f"most-frequent-token reference {metrics.get('baseline_accuracy', nan):.4f} "
        f"(**{metrics.get('accuracy_over_baseline', nan):.2f}x**; every run: {ratios}); training "
        f"{metrics.get('train_tokens_per_second', nan):,.0f} tokens/s at mask probability "
        f"{metrics.get('mask_probability', nan):.3f} ({metrics.get('mask_probability_source')}).",
    ]
    table.data = {"runs": runs}
    return table


def before_after(baseline: str, repeats: int = 1) -> Table:
    """The default `kedro run` of this checkout and of ``baseline``, alternating, fresh projects."""
    table = Table(
        f"Default `kedro run`: this checkout vs {baseline}",
        [
            "system",
            "repeat",
            "wall s",
            "peak RSS GB",
            "eval loss",
            "eval accuracy",
            "reference",
            "x reference",
            "mask p (source)",
        ],
    )
    with tempfile.TemporaryDirectory(prefix="bert-mlm-e2e-") as scratch:
        worktree = Path(scratch) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(worktree), baseline],
                       check=True, capture_output=True)
        try:
            for repeat in range(repeats):
                for name, source in (("this", ROOT), (baseline, worktree)):
                    parent = Path(scratch) / f"{name}-{repeat}"
                    parent.mkdir()
                    measured = kedro_run_in(scratch_project(str(parent), source), [], source)
                    m = measured["metrics"] or {}
                    table.rows.append(
                        [
                            name,
                            str(repeat),
                            f"{measured['seconds']:.1f}",
                            f"{measured['peak_rss_gb']:.2f}",
                            f"{m.get('eval_loss', float('nan')):.4f}",
                            f"{m.get('eval_accuracy', float('nan')):.4f}",
                            f"{m.get('baseline_accuracy', float('nan')):.4f}",
                            f"{m.get('accuracy_over_baseline', float('nan')):.2f}",
                            f"{m.get('mask_probability', float('nan')):.3f} ({m.get('mask_probability_source')})",
                        ]
                    )
                    print(table.rows[-1], flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True
            )
    table.notes = ["Each row is a fresh scratch project (new data/, new tuning study); eval numbers are on each "
                   "system's own fixed evaluation protocol (the masks of the test split differ between the two)."]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="", help="a commit to compare with (before/after)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--params", default="", help="kedro run --params for every run (e.g. training.threads=1)")
    args = parser.parse_args()
    extra = ["--params", args.params] if args.params else []
    print((before_after(args.baseline, args.repeats) if args.baseline else run(extra, args.repeats)).markdown())


if __name__ == "__main__":
    main()
