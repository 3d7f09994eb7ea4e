"""Corpus sources: files, directories (symlinks followed), globs, CSV/Parquet/JSONL tables and the
built-in corpus, read in bounded chunks of :class:`~bert_mlm.core.corpus.RawText`.

Text files are cut at paragraph boundaries, tables by rows; undecodable bytes and NUL bytes are
replaced or removed and counted; binary files and non-text columns are refused by name.
"""

from __future__ import annotations

import ast
import codecs
import glob
import json
import logging
import os
import re
import sysconfig
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bert_mlm.core.corpus import (
    _CONTROL,
    BUILTIN_SOURCE,
    SUPPORTED_SUFFIXES,
    TABLE_SUFFIXES,
    CorpusError,
    RawText,
)

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- reading
def resolve_corpus_files(path: str | os.PathLike) -> list[Path]:
    """Expand a file, a directory (recursively) or a glob into a sorted list of corpus files."""
    text = str(path)
    if any(ch in text for ch in "*?["):
        candidates = [Path(p) for p in glob.glob(text, recursive=True)]
        if not candidates:
            raise CorpusError(f"corpus.path: the glob {text!r} matches no file")
    else:
        candidate = Path(text).expanduser()
        if not candidate.exists():
            raise CorpusError(f"corpus.path: {text!r} does not exist")
        candidates = walk_files(candidate) if candidate.is_dir() else [candidate]
    files = sorted(
        p for p in candidates if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
    )
    if not files:
        raise CorpusError(
            f"corpus.path: {text!r} holds no corpus file; supported suffixes are "
            f"{', '.join(SUPPORTED_SUFFIXES)}"
        )
    return files


def walk_files(root: Path) -> list[Path]:
    """Every file under ``root``, following symlinked directories (``rglob`` skips them) but
    entering each real directory once, so a link back up the tree cannot loop. Logs each
    directory read, links shown with their targets."""
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    for directory, subdirectories, names in os.walk(root, followlinks=True):
        status = os.stat(directory)
        if (status.st_dev, status.st_ino) in seen:
            logger.warning("corpus.path: %s leads back to a directory already read (a symlink loop); skipped",
                           printable(directory))
            subdirectories[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        subdirectories.sort()
        here = [Path(directory) / name for name in sorted(names)]
        corpus_files = sum(1 for p in here if p.suffix.lower() in SUPPORTED_SUFFIXES)
        link = f" (symlink to {printable(os.path.realpath(directory))})" if Path(directory).is_symlink() else ""
        logger.info("corpus.path: %d corpus file(s) in %s%s", corpus_files, printable(directory), link)
        files += here
    return files


def printable(path: str | os.PathLike) -> str:
    """A path as text even when its name is not valid UTF-8 (shown with \\x escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


_replaced_bytes = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    # errors="replace" inserts one U+FFFD per undecodable *sequence*; count the bytes instead.
    _replaced_bytes.count += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("bert_mlm_count_replace", _count_and_replace)


def check_not_binary(head: bytes, source: str) -> None:
    """Refuse a file whose first bytes (64 KiB) are more than 10 % control characters (NUL
    included): a binary file. A few NUL bytes in text are not refused, wherever they are."""
    text = head[:65536].decode("utf-8", errors="replace")
    if text and len(_CONTROL.findall(text)) > 0.1 * len(text):
        raise CorpusError(f"corpus file {source!r} looks binary (mostly control characters or NUL bytes)")


def decode_text(data: bytes, source: str, check_binary: bool = True) -> RawText:
    """Decode UTF-8, replacing (and counting) undecodable bytes and removing (and counting) NUL
    bytes, the same in every chunk of a file; refuse binary files (``check_binary``: the first
    64 KiB of ``data``)."""
    if check_binary:
        check_not_binary(data, source)
    removed = data.count(b"\x00")
    if removed:
        data = data.replace(b"\x00", b"")
    _replaced_bytes.count = 0
    text = data.decode("utf-8", errors="bert_mlm_count_replace")
    return RawText(source=source, text=text, replaced_bytes=_replaced_bytes.count + removed)


# A blank line in bytes (CRLF too). Cutting a file right after one gives the same paragraphs as
# reading it whole: the cut falls between two paragraphs, and never inside a UTF-8 sequence.
# Blank: only spaces, tabs, vertical tabs, form feeds, NBSP or U+3000 (all spaces to normalise()).
_NEWLINE = rb"(?:\r\n|\r(?!\n)|\n)"  # a CR is a line end of its own only when no LF follows
_BLANK_LINE_BYTES = re.compile(_NEWLINE + rb"(?:[ \t\x0b\x0c]|\xc2\xa0|\xe3\x80\x80)*" + _NEWLINE)
READ_CHUNK_BYTES = 8 << 20
TABLE_CHUNK_ROWS = 20_000


def _paragraph_cut(block: bytes, hard_limit: int) -> int:
    """Where to cut ``block``: after its last blank line; 0 (read on) when it has none and is
    under ``hard_limit``; else at the last space or newline, or the last UTF-8 character start.

    Only a single paragraph longer than ``hard_limit`` is cut inside; it would be cut into
    ``corpus.max_document_chars`` pieces anyway, so only where one piece ends moves.
    """
    tail_start = max(0, len(block) - (1 << 20))
    for start in (tail_start, 0) if tail_start else (0,):
        ends = [match.end() for match in _BLANK_LINE_BYTES.finditer(block, start)]
        if ends:
            return ends[-1]
    if len(block) < hard_limit:
        return 0
    cut = max(block.rfind(b" "), block.rfind(b"\n"))
    if cut > 0:
        return cut + 1
    cut = len(block) - 1
    while cut > 0 and (block[cut] & 0xC0) == 0x80:  # back off to the start of the last character
        cut -= 1
    return cut if cut > 0 else len(block)


def iter_text_file(file: Path, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[RawText]:
    """A text file in chunks of about ``chunk_bytes``, each ending at a paragraph boundary."""
    source = printable(file)
    first = True
    carry = b""
    with open(file, "rb") as handle:
        check_not_binary(handle.read(65536), source)  # the file's head, whatever the first chunk holds
        handle.seek(0)
        while True:
            data = handle.read(chunk_bytes)
            block = carry + data if carry else data
            if len(data) < chunk_bytes:  # the end of the file
                if block:
                    yield replace(decode_text(block, source, check_binary=False), starts_source=first)
                return
            cut = _paragraph_cut(block, hard_limit=4 * chunk_bytes)
            if cut == 0:
                carry = block
                continue
            yield replace(decode_text(block[:cut], source, check_binary=False), starts_source=first)
            first = False
            carry = block[cut:]


def iter_table_rows(file: Path, text_column: str, chunk_rows: int = TABLE_CHUNK_ROWS) -> Iterator[list[RawText]]:
    """The ``text_column`` of a ``.csv``/``.parquet``/``.jsonl`` table, ``chunk_rows`` rows at a
    time; every non-null value is one document. A column that holds something else than text
    (numbers, lists, objects) is refused, naming the file; bytes are decoded as UTF-8."""
    suffix = file.suffix.lower()
    source = printable(file)

    def missing(columns) -> CorpusError:
        return CorpusError(
            f"corpus.text_column: column {text_column!r} does not exist in {source!r}; "
            f"its columns are {list(map(str, columns))}"
        )

    def not_text(kind: str) -> CorpusError:
        return CorpusError(f"corpus.text_column: column {text_column!r} of {source!r} holds {kind}, not text")

    try:
        if suffix == ".parquet":
            parquet = pq.ParquetFile(file)
            if text_column not in parquet.schema_arrow.names:
                raise missing(parquet.schema_arrow.names)
            kind = parquet.schema_arrow.field(text_column).type
            if pa.types.is_dictionary(kind):
                kind = kind.value_type
            is_bytes = pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or is_bytes):
                raise not_text(f"{kind} values")
            for batch in parquet.iter_batches(batch_size=chunk_rows, columns=[text_column]):
                values = batch.column(0).drop_null().to_pylist()
                yield [replace(decode_text(v, source, check_binary=False), is_document=True) if is_bytes
                       else RawText(source, v, is_document=True) for v in values]
        elif suffix == ".csv":
            columns = list(pd.read_csv(file, nrows=0, encoding_errors="replace").columns)
            if text_column not in columns:
                raise missing(columns)
            for frame in pd.read_csv(file, dtype=str, keep_default_na=False, encoding_errors="replace",
                                     usecols=[text_column], chunksize=chunk_rows):
                yield [RawText(source, v, is_document=True) for v in frame[text_column].tolist()]
        else:
            seen: set[str] = set()
            found = False
            for frame in pd.read_json(file, lines=True, dtype=False, chunksize=chunk_rows):
                seen.update(map(str, frame.columns))
                if text_column not in frame.columns:  # rows need not share keys
                    continue
                found = True
                values = frame[text_column].dropna().tolist()
                wrong = next((v for v in values if not isinstance(v, str)), None)
                if wrong is not None:
                    raise not_text(f"non-text values such as {wrong!r}")
                yield [RawText(source, v, is_document=True) for v in values]
            if not found:
                raise missing(sorted(seen))
    except CorpusError:
        raise
    except Exception as error:  # pandas and pyarrow raise many types; the user needs the file name
        where = first_bad_json_line(file) if suffix == ".jsonl" else None
        if where is not None:
            raise CorpusError(f"corpus file {source!r}, line {where[0]}: {where[1]}") from error
        raise CorpusError(f"corpus file {source!r} could not be read as {suffix}: {error}") from error


def first_bad_json_line(file: Path) -> tuple[int, str] | None:
    """The first line of a JSON Lines file that is not a JSON object, and what is wrong with it
    (pandas says only "Expected object or value")."""
    with open(file, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as error:
                return number, f"not valid JSON ({error.msg} at column {error.colno})"
            if not isinstance(value, dict):
                return number, f"a JSON {type(value).__name__}, not an object with a text field"
    return None


def iter_raw_batches(
    path: str | os.PathLike | None,
    text_column: str = "text",
    chunk_bytes: int = READ_CHUNK_BYTES,
    builtin_max_files: int | None = None,
) -> Iterator[list[RawText]]:
    """The raw corpus in batches of about ``chunk_bytes`` of text, in a fixed order.

    ``path``: a file, a directory (recursive) or a glob; ``None`` is the built-in corpus.
    """
    if path is None:
        yield from _batched(builtin_corpus(builtin_max_files), chunk_bytes)
        return
    for file in resolve_corpus_files(path):
        if file.suffix.lower() in TABLE_SUFFIXES:
            yield from _batched((row for rows in iter_table_rows(file, text_column) for row in rows), chunk_bytes)
        else:
            for chunk in iter_text_file(file, chunk_bytes):
                yield [chunk]


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus is (not its text): a file, directory or glob, or the built-in corpus.

    Loading it reads nothing; :meth:`batches` streams the raw texts.
    """

    path: str | None = None
    text_column: str = "text"
    builtin_when_empty: bool = True
    builtin_max_files: int | None = None

    @property
    def is_empty(self) -> bool:
        return self.path is None and not self.builtin_when_empty

    def describe(self) -> str:
        return self.path or ("built-in corpus" if self.builtin_when_empty else "none")

    def files(self) -> list[Path]:
        return [] if self.path is None else resolve_corpus_files(self.path)

    def total_bytes(self) -> int | None:
        return sum(f.stat().st_size for f in self.files()) if self.path is not None else None

    def batches(self, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[list[RawText]]:
        if self.is_empty:
            return iter(())
        return iter_raw_batches(self.path, self.text_column, chunk_bytes, self.builtin_max_files)


def _batched(items: Iterable[RawText], chunk_bytes: int) -> Iterator[list[RawText]]:
    batch: list[RawText] = []
    size = 0
    for item in items:
        batch.append(item)
        size += len(item.text)
        if size >= chunk_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def read_corpus(path: str | os.PathLike, text_column: str = "text") -> list[RawText]:
    """Every corpus file under ``path`` (file, directory or glob), in memory: for small corpora."""
    return [item for batch in iter_raw_batches(path, text_column) for item in batch]


# ----------------------------------------------------------------------------- built-in corpus
_STDLIB_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__phello__"}


def _docstrings_of_file(path: str) -> list[str]:
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:  # depth-first, source order: deterministic
        node = stack.pop()
        doc = ast.get_docstring(node, clean=True)
        if doc:
            found.append(doc)
        children = [
            child
            for child in getattr(node, "body", [])
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        stack.extend(reversed(children))
    return found


def stdlib_source_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [
        p
        for p in sorted(root.rglob("*.py"))
        if not _STDLIB_SKIP_PARTS.intersection(p.relative_to(root).parts)
    ]


def builtin_corpus(max_files: int | None = None, workers: int | None = None) -> list[RawText]:
    """The documentation strings of the Python standard library (about 1.7 MB on 3.11).

    Parsed with ``ast`` rather than imported, so nothing runs and the result depends only on
    the Python version. Parsing is the slow part (about 10 s on one core), so it fans out over
    processes; the order of the result does not depend on the number of workers.
    """
    files = stdlib_source_files()[:max_files]
    workers = workers or min(len(files), os.cpu_count() or 1)
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            per_file = list(pool.map(_docstrings_of_file, map(str, files), chunksize=8))
    else:
        per_file = [_docstrings_of_file(str(f)) for f in files]
    root = Path(sysconfig.get_paths()["stdlib"])
    return [
        RawText(source=f"{BUILTIN_SOURCE}/{file.relative_to(root)}", text=doc)
        for file, docs in zip(files, per_file, strict=True)
        for doc in docs
    ]
