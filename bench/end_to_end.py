"""End to end: `kedro run` of the default chain (built-in corpus, conf/base) in a fresh scratch
copy of the project (new data/, new tuning study), wall time per node.

    python bench/end_to_end.py
"""

from __future__ import annotations

import argparse

from _project import kedro_run
from _timing import Table


def run(extra_arguments: list[str] | None = None) -> Table:
    measured = kedro_run(list(extra_arguments or []))
    table = Table("End to end: `kedro run` (default chain, built-in corpus)", ["node", "seconds", "with catalog I/O", "share"])
    total = measured["seconds"]
    for node in measured["nodes"]:
        table.rows.append([node["node"], f"{node['seconds']:.1f}", f"{node['seconds_with_io']:.1f}",
                           f"{node['seconds_with_io'] / total:.0%}"])
    in_nodes = sum(n["seconds_with_io"] for n in measured["nodes"])
    table.rows.append(["Kedro start-up, hooks, the rest", "", f"{total - in_nodes:.1f}", f"{(total - in_nodes) / total:.0%}"])
    table.rows.append(["**total wall**", "", f"**{total:.1f}**", "100%"])
    metrics = measured["metrics"] or {}
    table.notes = [
        f"Peak RSS {measured['peak_rss_gb']:.2f} GB. Eval accuracy {metrics.get('eval_accuracy', float('nan')):.4f} vs the "
        f"most-frequent-token reference {metrics.get('baseline_accuracy', float('nan')):.4f} "
        f"({metrics.get('accuracy_over_baseline', float('nan')):.2f}x); training "
        f"{metrics.get('train_tokens_per_second', float('nan')):,.0f} tokens/s at mask probability "
        f"{metrics.get('mask_probability', float('nan')):.3f} ({metrics.get('mask_probability_source')}).",
    ]
    table.data = {"measured": measured}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    print(run().markdown())


if __name__ == "__main__":
    main()
