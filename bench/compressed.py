"""The data stages on k copies of the Gutenberg corpus, plain against gzip-compressed, side by side
in one run: peak memory and throughput (counted in uncompressed megabytes), and the token stores
compared by their manifests' digests.

    python bench/compressed.py                      # 64x, one repeat
    python bench/compressed.py --factor 16 --repeats 3

The gzip copy of each book is written once; the k copies are symlinks (as in bench/scaling.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
from pathlib import Path

from _project import ROOT, kedro_run_in
from _timing import Table

from bert_mlm.scratch import scratch_project


def replicated(books: list[Path], factor: int, target: Path, suffix: str) -> None:
    target.mkdir(parents=True)
    for copy in range(factor):
        for book in books:
            (target / f"{book.name.split('.')[0]}-{copy:03d}.txt{suffix}").symlink_to(book.resolve())


def store_digests(project: Path) -> dict[str, str]:
    manifest = sorted((project / "data" / "04_feature" / "token_store").glob("*/token_store/manifest.json"))
    splits = json.loads(manifest[-1].read_text())["splits"]
    return {split: info["digest"] for split, info in splits.items()}


def run(corpus: Path, factor: int, repeats: int) -> Table:
    table = Table(
        f"Data stages on {factor}x Gutenberg: plain .txt against .txt.gz (medians of {repeats})",
        ["corpus", "input MB", "text MB", "wall s", "text MB/s", "x plain", "peak RSS GB", "peak PSS GB (tree)"],
    )
    books = sorted(p for p in corpus.glob("*.txt") if not p.name.startswith("README"))
    text_mb = factor * sum(p.stat().st_size for p in books) / 1e6
    with tempfile.TemporaryDirectory(prefix="bert-mlm-compressed-") as scratch_dir:
        scratch = Path(scratch_dir)
        (scratch / "gz").mkdir()
        packed = []
        for book in books:
            target = scratch / "gz" / f"{book.name}.gz"
            target.write_bytes(gzip.compress(book.read_bytes(), compresslevel=6))
            packed.append(target)
        inputs = {
            "plain": (books, "", text_mb),
            "gzip": (packed, ".gz", factor * sum(p.stat().st_size for p in packed) / 1e6),
        }
        runs: dict[str, list[dict]] = {name: [] for name in inputs}
        digests = {}
        for name, (files, suffix, _) in inputs.items():
            replicated(files, factor, scratch / f"corpus-{name}", suffix)
        for repeat in range(repeats):
            for name in inputs:  # alternating: the machine's drift hits both
                parent = scratch / f"{name}-{repeat}"
                parent.mkdir()
                project = scratch_project(str(parent), ROOT)
                measured = kedro_run_in(project, ["--pipelines", "ingestion,tokenization,sequences", "--params",
                                                  f"corpus.path={scratch / f'corpus-{name}'},corpus.deduplicate=false"])
                runs[name].append(measured)
                digests[name] = store_digests(project)
                print(
                    f"{name} repeat {repeat}: {measured['seconds']:.1f} s, RSS {measured['peak_rss_gb']:.2f} GB",
                    flush=True,
                )
    plain_seconds = statistics.median(r["seconds"] for r in runs["plain"])
    for name, (_, _, input_mb) in inputs.items():
        seconds = statistics.median(r["seconds"] for r in runs[name])
        table.rows.append(
            [
                name,
                f"{input_mb:.0f}",
                f"{text_mb:.0f}",
                f"{seconds:.1f}",
                f"{text_mb / seconds:.2f}",
                f"{plain_seconds / seconds:.2f}",
                f"{statistics.median(r['peak_rss_gb'] for r in runs[name]):.2f}",
                f"{statistics.median(r['peak_pss_gb'] for r in runs[name]):.2f}",
            ]
        )
    table.notes = [f"token store digests equal: {digests['plain'] == digests['gzip']} ({digests['gzip']})"]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpora" / "gutenberg"))
    parser.add_argument("--factor", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(run(Path(args.corpus), args.factor, args.repeats).markdown())


if __name__ == "__main__":
    main()
