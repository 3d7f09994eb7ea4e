"""The Chinese data path at scale: `kedro run --env zh` data stages (ingestion, tokenization,
sequences with whole-word segmentation) on k copies (symlinks) of ChnSentiCorp + msra-ner's news,
this checkout side by side with a baseline commit, on the local and the Dask engine.

    python bench/chinese_data_path.py                                  # 1x,16x,64x; baseline main; local+dask
    python bench/chinese_data_path.py --factors 1,16 --engines local --repeats 3
    python bench/chinese_data_path.py --baseline-factors 1,16          # the baseline at fewer sizes

For each size, engine and system: a fresh scratch project runs
`kedro run --env zh --pipelines ingestion,tokenization,sequences --params corpus.path=<k copies>,
corpus.text_column=review,corpus.deduplicate=false` (the copies are not folded back into one).
Systems alternate within each repeat; the table reports medians. "this, no segmentation" is this
checkout with `masking.word_segmenter=wordpiece` (no Chinese word boundaries): segmentation's cost is
the difference, since the boundaries are found inside the encoding pass (no stage of its own).
Columns: MB/s over the data
stages' time (the nodes with their loads and saves, as the project's NodeTimingHook measures them)
and over the whole process (Kedro's start-up included); the whole process tree's peak memory
(PSS: shared pages counted once; and the sum of the processes' RSS), both sampled every 0.25 s; each
stage's share of the data stages' time (sequences: the index, and before the boundaries moved into
the encoding pass the word segmentation; segmentation: 1 - the data stages' time without it / with
it); and the 1-minute load average before each run (this machine's cores
are shared: compare the ratios of one row pair, measured side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from _project import ROOT, kedro_run_in
from _timing import Table

from bert_mlm.scratch import scratch_project

SHARED = ROOT.parent / "shared" / "corpora"
FILES = {"reviews": SHARED / "chnsenticorp" / "ChnSentiCorp_htl_all.csv", "news": SHARED / "msra-ner" / "news.txt"}
STAGES = {
    "ingestion": ("clean_and_split_corpus", "summarise_corpus"),
    "tokenizer": ("build_tokenizer",),
    "encoding": ("encode_corpus", "summarise_tokens"),
    "sequences": ("build_model_inputs",),
}


def replicated_corpus(factor: int, target: Path) -> float:
    """``factor`` symlinks to each file; returns the megabytes the run reads."""
    target.mkdir(parents=True)
    for copy in range(factor):
        for name, file in FILES.items():
            (target / f"{name}-{copy:03d}{file.suffix}").symlink_to(file.resolve())
    return factor * sum(file.stat().st_size for file in FILES.values()) / 1e6


def baseline_checkout(ref: str, parent: Path) -> Path:
    target = parent / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(target), ref],
                   check=True, capture_output=True)
    return target


def load_average() -> float:
    return os.getloadavg()[0]


def segmentation_share(without: list[dict], with_seconds: float) -> str:
    """Word segmentation's share of the data stages: 1 - their time without it / with it."""
    return f"{100 * (1 - statistics.median(r['data_seconds'] for r in without) / with_seconds):.0f}"


def run(factors=(1, 16, 64), baseline: str | None = "main", baseline_factors=(1, 16, 64),
        engines=("local", "dask"), repeats: int = 1, without_segmentation: bool = True) -> Table:
    table = Table(
        "Chinese data path: `--env zh` data stages on k x (ChnSentiCorp + msra-ner news.txt)",
        ["corpus", "MB", "engine", "system", "load", "data stages s", "MB/s (stages)", "wall s", "MB/s (wall)",
         "peak PSS GiB (tree)", "peak RSS GiB (tree sum)", "ingestion %", "tokenizer %", "encoding %",
         "sequences %", "segmentation %"],
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="bert-mlm-zh-") as scratch_dir:
        scratch = Path(scratch_dir)
        systems = {"this": ROOT}
        extra = {"this, no segmentation": ",masking.word_segmenter=wordpiece"}
        if without_segmentation:
            systems["this, no segmentation"] = ROOT
        if baseline:
            commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", baseline], check=True,
                                    capture_output=True, text=True).stdout.strip()
            systems[f"baseline {baseline} ({commit})"] = baseline_checkout(baseline, scratch)
        try:
            for factor in factors:
                megabytes = replicated_corpus(factor, scratch / f"corpus-{factor}")
                for engine in engines:
                    chosen = {n: s for n, s in systems.items() if n.startswith("this") or factor in baseline_factors}
                    runs: dict[str, list[dict]] = {name: [] for name in chosen}
                    for repeat in range(repeats):
                        for number, (name, source) in enumerate(chosen.items()):
                            parent = scratch / f"{factor}-{engine}-{number}-{repeat}"
                            parent.mkdir()
                            project = scratch_project(str(parent), source)
                            load = load_average()
                            measured = kedro_run_in(project, [
                                "--env", "zh", "--pipelines", "ingestion,tokenization,sequences", "--params",
                                f"corpus.path={scratch / f'corpus-{factor}'},corpus.text_column=review,"
                                f"corpus.deduplicate=false,data.engine={engine}{extra.get(name, '')}",
                            ], source)
                            nodes = {n["node"]: n["seconds_with_io"] for n in measured["nodes"]}
                            measured["stages"] = {s: sum(nodes.get(n, 0.0) for n in ns) for s, ns in STAGES.items()}
                            measured["data_seconds"] = sum(measured["stages"].values())
                            measured["load"] = load
                            runs[name].append(measured)
                            print(f"{factor}x {engine} {name}: stages {measured['data_seconds']:.1f} s, wall "
                                  f"{measured['seconds']:.1f} s, PSS {measured['peak_pss_gb']:.2f} GB, load {load:.1f}",
                                  flush=True)
                            subprocess.run(["rm", "-rf", str(parent)], check=False)
                    without = runs.get("this, no segmentation")
                    for name, measured_runs in runs.items():
                        med = lambda key, m=measured_runs: statistics.median(r[key] for r in m)  # noqa: E731
                        share = lambda s, m=measured_runs: statistics.median(  # noqa: E731
                            r["stages"][s] / r["data_seconds"] for r in m)
                        table.rows.append([
                            f"{factor}x", f"{megabytes:.0f}", engine, name, f"{med('load'):.1f}",
                            f"{med('data_seconds'):.1f}", f"{megabytes / med('data_seconds'):.2f}",
                            f"{med('seconds'):.1f}", f"{megabytes / med('seconds'):.2f}", f"{med('peak_pss_gb'):.2f}",
                            f"{med('peak_rss_tree_gb'):.2f}", *(f"{100 * share(s):.0f}" for s in STAGES),
                            segmentation_share(without, med("data_seconds")) if name == "this" and without else "-",
                        ])
                        results.append({"factor": factor, "megabytes": megabytes, "engine": engine, "system": name,
                                        "runs": [{k: v for k, v in r.items() if k != "metrics"}
                                                 for r in measured_runs]})
        finally:
            if baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / "baseline")],
                               capture_output=True)
    table.notes = [
        "data stages s: the data nodes' time with their catalog I/O (the work runs while the datasets save); "
        "wall s adds Kedro's start-up. MB: the files' bytes (UTF-8; ~3 bytes a Chinese character).",
        "msra-ner's news.txt is one sentence per line without blank lines: without corpus.line_by_line its lines "
        "are joined into documents of up to corpus.max_document_chars (100,000) characters.",
        "load: the 1-minute load average when the run started (2 cores shared with other sessions).",
    ]
    table.data = {"results": results}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", default="1,16,64")
    parser.add_argument("--baseline", default="main", help="a commit or branch to compare with; empty: none")
    parser.add_argument("--baseline-factors", default="1,16,64")
    parser.add_argument("--engines", default="local,dask")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output", default=None, help="also write the table and the raw results (JSON) here")
    parser.add_argument("--no-without-segmentation", action="store_true",
                        help="skip the runs without word segmentation (the segmentation %% column)")
    args = parser.parse_args()
    ints = lambda text: tuple(int(f) for f in text.split(",") if f)  # noqa: E731
    table = run(ints(args.factors), args.baseline or None, ints(args.baseline_factors),
                tuple(e for e in args.engines.split(",") if e), args.repeats, not args.no_without_segmentation)
    print(table.markdown())
    if args.output:
        Path(args.output).write_text(json.dumps({"markdown": table.markdown(), **table.data}, indent=2, default=str))


if __name__ == "__main__":
    main()
