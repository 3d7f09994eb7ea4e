"""End to end: `kedro run` of the default chain (built-in corpus, conf/base) in a fresh scratch
copy of the project (new data/, new tuning study), wall time per node; with `--baseline REF`, the
same run of an earlier commit (a git worktree), alternating, for a before/after comparison.

    python bench/end_to_end.py
    python bench/end_to_end.py --baseline ef0a54d --repeats 1
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from _project import ROOT, kedro_run, kedro_run_in
from _timing import Table

from bert_mlm.scratch import scratch_project


def run(extra_arguments: list[str] | None = None) -> Table:
    measured = kedro_run(list(extra_arguments or []))
    table = Table(
        "End to end: `kedro run` (default chain, built-in corpus)", ["node", "seconds", "with catalog I/O", "share"]
    )
    total = measured["seconds"]
    for node in measured["nodes"]:
        table.rows.append([node["node"], f"{node['seconds']:.1f}", f"{node['seconds_with_io']:.1f}",
                           f"{node['seconds_with_io'] / total:.0%}"])
    in_nodes = sum(n["seconds_with_io"] for n in measured["nodes"])
    table.rows.append(
        ["Kedro start-up, hooks, the rest", "", f"{total - in_nodes:.1f}", f"{(total - in_nodes) / total:.0%}"]
    )
    table.rows.append(["**total wall**", "", f"**{total:.1f}**", "100%"])
    metrics = measured["metrics"] or {}
    table.notes = [
        f"Peak RSS {measured['peak_rss_gb']:.2f} GB. "
        f"Eval accuracy {metrics.get('eval_accuracy', float('nan')):.4f} vs the "
        f"most-frequent-token reference {metrics.get('baseline_accuracy', float('nan')):.4f} "
        f"({metrics.get('accuracy_over_baseline', float('nan')):.2f}x); training "
        f"{metrics.get('train_tokens_per_second', float('nan')):,.0f} tokens/s at mask probability "
        f"{metrics.get('mask_probability', float('nan')):.3f} ({metrics.get('mask_probability_source')}).",
    ]
    table.data = {"measured": measured}
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
    args = parser.parse_args()
    print((before_after(args.baseline, args.repeats) if args.baseline else run()).markdown())


if __name__ == "__main__":
    main()
