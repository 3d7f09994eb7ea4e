"""Reading corpus files: this checkout's streams (fsspec's compression registry, ``backports.zstd``
for .zst, one error adapter) against a baseline commit's (its hand-written ``_ZstdReader`` and
stacked wrappers), side by side in one run on the same files; JSON Lines read by ``json.loads``
line by line against pandas' chunked reader; and what each zstd reader does with a truncated file.

    python bench/streams.py                            # baseline c8d85c5, ~100 MB, 5 repeats
    python bench/streams.py --baseline c8d85c5 --mb 50 --repeats 3

The baseline's ``core/sources.py`` is taken from git and imported beside this checkout's package.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from _project import ROOT
from _timing import Table, alternate, median

from bert_mlm.core.data.corpus import CorpusError
from bert_mlm.core.data.sources import streams

try:
    from compression import zstd  # Python 3.14
except ImportError:
    from backports import zstd


def baseline_sources(commit: str):
    """The baseline commit's ``bert_mlm/core/sources.py`` as a module (it imports only ``corpus``)."""
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:src/bert_mlm/core/sources.py"],
                           capture_output=True, text=True)
    if shown.returncode:
        sys.exit(f"--baseline {commit}: no single-file core/sources.py there (the package replaced it in 64ffffd); "
                 "name a commit before it, such as c8d85c5")
    code = shown.stdout
    path = Path(tempfile.mkdtemp(prefix="bert-mlm-baseline-")) / "baseline_sources.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("baseline_sources", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_sources"] = module
    spec.loader.exec_module(module)
    return module


def drain(open_file, path: Path) -> int:
    with open_file(path) as handle:
        total = 0
        while data := handle.read(8 << 20):
            total += len(data)
    return total


def truncated_behaviour(open_file, path: Path) -> str:
    try:
        return f"read {drain(open_file, path):,} bytes silently"
    except CorpusError as error:
        return f"CorpusError ({str(error).split(': ', 1)[1][:60]}...)"
    except Exception as error:  # noqa: BLE001 - reported as it is
        return f"{type(error).__name__}"


def zstandard_reader(path: Path):
    """``zstandard``'s stream reader, which fsspec uses when backports.zstd is not installed."""
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"))  # noqa: SIM115 - drain closes it


def run(corpus: Path, megabytes: int, repeats: int, baseline: str) -> list[Table]:
    old = baseline_sources(baseline)
    books = b"".join(p.read_bytes() for p in sorted(corpus.glob("*.txt")) if not p.name.startswith("README"))
    text = (books * (megabytes * 10**6 // len(books) + 1))[: megabytes * 10**6]
    scratch = Path(tempfile.mkdtemp(prefix="bert-mlm-streams-"))
    files = {"zstd": scratch / "corpus.txt.zst", "gzip": scratch / "corpus.txt.gz"}
    files["zstd"].write_bytes(zstd.compress(text, level=3))
    files["gzip"].write_bytes(gzip.compress(text, compresslevel=6))
    table = Table(f"Reading {megabytes} MB of text through each stream (medians of {repeats}, MB/s of text)",
                  ["file", "this checkout MB/s", f"{baseline} MB/s", "x baseline"])
    for path in files.values():
        seconds = alternate({"this": lambda p=path: drain(streams.open_corpus_file, p),
                             "baseline": lambda p=path: drain(old.open_corpus_file, p)}, repeats)
        this, before = megabytes / median(seconds["this"]), megabytes / median(seconds["baseline"])
        table.rows.append([f".txt{path.suffix} ({path.stat().st_size / 1e6:.0f} MB)", f"{this:.0f}", f"{before:.0f}",
                           f"{this / before:.2f}"])
    cut = scratch / "cut.txt.zst"
    cut.write_bytes(files["zstd"].read_bytes()[: files["zstd"].stat().st_size // 2])
    try:
        fallback = truncated_behaviour(zstandard_reader, cut)
    except ImportError:
        fallback = "not installed here"
    table.notes = [f"A .zst file cut in half: this checkout: {truncated_behaviour(streams.open_corpus_file, cut)}; "
                   f"{baseline}: {truncated_behaviour(old.open_corpus_file, cut)}; zstandard's stream reader "
                   f"(fsspec's zstd without backports.zstd): {fallback}."]

    reviews = pd.read_csv(corpus.parent / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    rows = pd.concat([reviews.rename(columns={"review": "text"})] * 20, ignore_index=True)
    jsonl = scratch / "reviews.jsonl"
    rows.to_json(jsonl, orient="records", lines=True, force_ascii=False)
    size = jsonl.stat().st_size / 1e6

    def pandas_chunks() -> int:
        with open(jsonl, encoding="utf-8") as handle:
            return sum(len(f["text"].dropna()) for f in pd.read_json(handle, lines=True, dtype=False, chunksize=20000))

    def json_loads() -> int:
        with open(jsonl, "rb") as raw:
            return sum(json.loads(line).get("text") is not None
                       for line in io.TextIOWrapper(raw, "utf-8", errors="replace") if line.strip())

    seconds = alternate({"json": json_loads, "pandas": pandas_chunks}, repeats)
    lines = Table(f"JSON Lines: {len(rows):,} ChnSentiCorp reviews ({size:.0f} MB), medians of {repeats}",
                  ["reader", "MB/s", "x pandas"])
    for name, label in (("json", "json.loads per line (this checkout)"), ("pandas", "pandas read_json chunks")):
        lines.rows.append([label, f"{size / median(seconds[name]):.1f}",
                           f"{median(seconds['pandas']) / median(seconds[name]):.2f}"])
    return [table, lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpora" / "gutenberg"))
    parser.add_argument("--baseline", default="c8d85c5")
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for table in run(Path(args.corpus), args.mb, args.repeats, args.baseline):
        print(table.markdown())


if __name__ == "__main__":
    main()
