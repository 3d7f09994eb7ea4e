"""Scaling of the data stages (ingestion, tokenization, sequences) with the corpus size: 1x, 4x
and 16x the Gutenberg corpus, wall time and peak memory of `kedro run`.

    python bench/scaling.py --corpus ../shared/corpora/gutenberg --factors 1,4,16

The k-times corpus holds k copies of every book; `corpus.deduplicate=false` keeps the copies
(exact de-duplication would otherwise fold them back into one), so every stage really sees k
times the text. Each run is a fresh `kedro run` in a scratch copy of the project (start-up of
~15 s included).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _project import kedro_run
from _timing import Table


def replicated_corpus(corpus: Path, factor: int, target: Path) -> float:
    target.mkdir(parents=True)
    books = sorted(p for p in corpus.glob("*.txt") if not p.name.startswith("README"))
    for copy in range(factor):
        for book in books:
            shutil.copyfile(book, target / f"{book.stem}-{copy:02d}.txt")
    return sum(p.stat().st_size for p in target.iterdir()) / 1e6


def run(corpus: str, factors: tuple[int, ...] = (1, 4, 16)) -> Table:
    table = Table(
        "Scaling: data stages on k x the Gutenberg corpus",
        ["corpus", "MB", "wall s", "s per MB", "peak RSS GB", "ingestion s", "tokenization s", "sequences s"],
    )
    results = []
    for factor in factors:
        with tempfile.TemporaryDirectory(prefix="bert-mlm-corpus-") as scratch:
            megabytes = replicated_corpus(Path(corpus), factor, Path(scratch) / "corpus")
            measured = kedro_run(["--pipelines", "ingestion,tokenization,sequences",
                                  "--params", f"corpus.path={scratch}/corpus,corpus.deduplicate=false"])
        node = {n["node"]: n["seconds_with_io"] for n in measured["nodes"]}

        def stage(*names: str, node: dict = node) -> float:
            return sum(node.get(n, 0.0) for n in names)

        results.append({"factor": factor, "megabytes": megabytes, **measured})
        table.rows.append([
            f"{factor}x", f"{megabytes:.0f}", f"{measured['seconds']:.1f}", f"{measured['seconds'] / megabytes:.2f}",
            f"{measured['peak_rss_gb']:.2f}", f"{stage('clean_and_split_corpus'):.1f}",
            f"{stage('build_tokenizer', 'encode_corpus'):.1f}", f"{stage('build_model_inputs'):.1f}",
        ])
    first, last = results[0], results[-1]
    growth = (last["seconds"] - first["seconds"]) / (last["megabytes"] - first["megabytes"]) if len(results) > 1 else 0
    table.notes = [
        f"Wall time includes Kedro start-up (imports, config): the fixed part. Marginal cost from "
        f"{first['factor']}x to {last['factor']}x: {growth:.2f} s per MB; time ratio "
        f"{last['seconds'] / first['seconds']:.1f}x for {last['megabytes'] / first['megabytes']:.0f}x the text.",
        "Per-stage columns are node times including their catalog loads and saves (NodeTimingHook).",
    ]
    table.data = {"results": [{k: v for k, v in r.items() if k != "metrics"} for r in results]}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--factors", default="1,4,16")
    args = parser.parse_args()
    print(run(args.corpus, tuple(int(f) for f in args.factors.split(","))).markdown())


if __name__ == "__main__":
    main()
