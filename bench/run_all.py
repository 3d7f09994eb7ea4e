"""The whole benchmark suite in one run: every comparison side by side, alternating the systems,
repeated; one Markdown table per comparison plus the machine it ran on.

    python bench/run_all.py                      # everything, ~45 min on 2 CPU cores
    python bench/run_all.py --sections masking,tokenization --quick

Writes bench/results/<UTC time>/report.md and results.json (and prints the report). BENCHMARKS.md
holds the report of one full run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import end_to_end
import levers
import masking
import quality
import scaling
import tokenization
import torch
import training_throughput
import whole_word
from _data import prepare
from _timing import fp32_matmul_peak, machine_info

SECTIONS = ("tokenization", "masking", "whole_word", "training", "levers", "quality", "scaling", "end_to_end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument(
        "--shared", default="../shared", help="the shared data (whole_word: Gutenberg and ChnSentiCorp)"
    )
    parser.add_argument("--extra-eval", default="../shared/corpora/wikitext-2-raw/wiki.valid.raw")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument(
        "--quick", action="store_true", help="few repeats and steps: checks the suite runs, not a measurement"
    )
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--quality-steps", type=int, default=300)
    parser.add_argument(
        "--no-hf-defaults", action="store_true", help="skip the quality row of the Trainer's own defaults"
    )
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"--sections: unknown {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    output = Path(args.output or f"bench/results/{datetime.now(timezone.utc):%Y%m%d-%H%M%S}")
    output.mkdir(parents=True, exist_ok=True)
    repeats = 2 if args.quick else 3
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    machine = machine_info()
    machine["fp32_matmul_peak_gflops"] = fp32_matmul_peak()
    log(f"machine: {machine}")
    needs_data = {"tokenization", "masking", "training", "levers", "quality"} & set(sections)
    prepared = prepare(args.corpus, args.extra_eval) if needs_data else None
    if prepared:
        log(f"prepared {args.corpus}: {sum(map(len, prepared.sequences['train'])):,} training tokens")
    tables = []
    size = {"layers": args.layers, "hidden": args.hidden}
    for section in sections:
        log(f"section {section} ...")
        if section == "tokenization":
            tables.append(tokenization.run(prepared, repeats=repeats + 2))
        elif section == "masking":
            tables += masking.run(prepared, repeats=repeats + 2, batches=20 if args.quick else 100)
        elif section == "whole_word":
            tables += whole_word.run(args.shared, repeats=repeats + 2, steps=10 if args.quick else 300,
                                     seeds=1 if args.quick else 2)
        elif section == "training":
            tables.append(training_throughput.run(prepared, **size, steps=6 if args.quick else 15, repeats=repeats))
        elif section == "levers":
            tables += levers.run(
                prepared, **size, repeats=repeats, steps=2 if args.quick else 4, compile_lever=not args.quick
            )
        elif section == "quality":
            tables.append(quality.run(prepared, steps=10 if args.quick else args.quality_steps, **size,
                                      hf_defaults=not args.no_hf_defaults))
        elif section == "scaling":
            tables.extend(scaling.run(args.corpus, (1, 2) if args.quick else (1, 16, 64, 256),
                                      baseline_factors=(1,) if args.quick else (1, 16, 64),
                                      train_factors=(2,) if args.quick else (64, 256)))
        elif section == "end_to_end":
            quick = ["--env", "smoke"] if args.quick else []
            tables.append(end_to_end.run(quick))
        (output / "partial.md").write_text("\n".join(t.markdown() for t in tables))  # nothing lost on a crash
    total = time.perf_counter() - started
    header = [
        "## Machine", "",
        f"- CPU: {machine['cpu']}, {machine['cores']} cores, torch threads {machine['torch_threads']}, "
        f"{machine['memory_gib']} GiB; GPU: {machine['cuda'] or 'none'}",
        f"- Python {machine['python']}, torch {machine['torch']}; {machine['platform']}",
        f"- fp32 matmul peak at the start: {machine['fp32_matmul_peak_gflops']:.0f} GFLOP/s; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in machine['load_average'])}",
        f"- Suite: `python bench/run_all.py {' '.join(sys.argv[1:])}`, {total / 60:.1f} min, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", "",
    ]
    report = "\n".join(header) + "\n" + "\n".join(table.markdown() for table in tables)
    (output / "report.md").write_text(report)
    (output / "results.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "tables": [{"title": t.title, "header": t.header, "rows": t.rows, "data": t.data} for t in tables],
            },
            indent=1,
            default=str,
        )
    )
    print(report)
    log(f"wrote {output}/report.md")


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
