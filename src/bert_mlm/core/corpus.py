"""Corpus reading, cleaning, paragraph joining, de-duplication and the hash split.

Everything here is Kedro-free. A *document* is one cleaned paragraph of running text (a
blank-line separated block of a text file, one row of a table, one docstring paragraph of the
built-in corpus). Documents are the unit of de-duplication and of the train/valid/test split.
"""

from __future__ import annotations

import ast
import codecs
import glob
import hashlib
import os
import re
import sysconfig
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

TEXT_SUFFIXES = (".txt", ".raw", ".text", ".md")
TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + TABLE_SUFFIXES
SPLITS = ("train", "valid", "test")
BUILTIN_SOURCE = "builtin:python-stdlib-docstrings"

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_SPACES = re.compile(r"[^\S\n]+")
# Control characters other than newline and tab mark binary data (or mojibake), not text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class CorpusConfig:
    # ``path`` and ``text_column`` are read by the catalog's ``raw_corpus`` dataset (from
    # ``--params corpus.path=...``); they are listed here so that those overrides validate.
    path: str | None = None
    text_column: str = "text"
    min_chars: int = 20
    # Longer paragraphs (a file without blank lines, a 100 MB line) are cut at whitespace into
    # documents of at most this many characters, so one giant line cannot exhaust memory later.
    max_document_chars: int = 100_000
    deduplicate: bool = True
    split_ratios: dict = field(default_factory=lambda: {"train": 0.9, "valid": 0.05, "test": 0.05})
    split_salt: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.min_chars, int) or self.min_chars < 1:
            raise ValueError(f"corpus.min_chars: {self.min_chars!r} must be a positive integer")
        if not isinstance(self.max_document_chars, int) or self.max_document_chars < max(self.min_chars, 100):
            raise ValueError(
                f"corpus.max_document_chars: {self.max_document_chars!r} must be an integer >= 100 "
                "and >= corpus.min_chars"
            )
        validate_split_ratios(dict(self.split_ratios))


class CorpusError(ValueError):
    """A corpus input that cannot be used; the message names the parameter or the file."""


@dataclass
class RawText:
    """Text of one source before cleaning, with how many bytes were undecodable."""

    source: str
    text: str
    replaced_bytes: int = 0
    # A table row is one document already; a text file is split into paragraphs.
    is_document: bool = False


@dataclass
class CleaningReport:
    sources: int = 0
    raw_items: int = 0
    replaced_bytes: int = 0
    dropped_short: int = 0
    dropped_duplicates: int = 0
    per_source: dict[str, int] = field(default_factory=dict)


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
        candidates = sorted(candidate.rglob("*")) if candidate.is_dir() else [candidate]
    files = sorted(
        p for p in candidates if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
    )
    if not files:
        raise CorpusError(
            f"corpus.path: {text!r} holds no corpus file; supported suffixes are "
            f"{', '.join(SUPPORTED_SUFFIXES)}"
        )
    return files


_replaced_bytes = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    # errors="replace" inserts one U+FFFD per undecodable *sequence*; count the bytes instead.
    _replaced_bytes.count += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("bert_mlm_count_replace", _count_and_replace)


def decode_text(data: bytes, source: str) -> RawText:
    """Decode UTF-8, replacing (and counting) undecodable bytes; refuse binary files."""
    sample = data[:65536]
    if b"\x00" in sample:
        raise CorpusError(f"corpus file {source!r} looks binary (it contains NUL bytes)")
    _replaced_bytes.count = 0
    text = data.decode("utf-8", errors="bert_mlm_count_replace")
    replaced = _replaced_bytes.count
    if sample and len(_CONTROL.findall(text[:65536])) > 0.1 * min(len(text), 65536):
        raise CorpusError(f"corpus file {source!r} looks binary (mostly control characters)")
    return RawText(source=source, text=text, replaced_bytes=replaced)


def read_table_texts(file: Path, text_column: str) -> list[RawText]:
    suffix = file.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(file, dtype=str, keep_default_na=False, encoding_errors="replace")
        elif suffix == ".parquet":
            frame = pd.read_parquet(file)
        else:
            frame = pd.read_json(file, lines=True, dtype=False)
    except Exception as error:  # pandas raises many types; the user needs the file name
        raise CorpusError(f"corpus file {str(file)!r} could not be read as {suffix}: {error}") from error
    if text_column not in frame.columns:
        raise CorpusError(
            f"corpus.text_column: column {text_column!r} does not exist in {str(file)!r}; "
            f"its columns are {list(map(str, frame.columns))}"
        )
    values = frame[text_column].dropna().astype(str)
    return [RawText(source=str(file), text=v, is_document=True) for v in values]


def read_corpus(path: str | os.PathLike, text_column: str = "text") -> list[RawText]:
    """Read every corpus file under ``path`` (file, directory or glob)."""
    items: list[RawText] = []
    for file in resolve_corpus_files(path):
        if file.suffix.lower() in TABLE_SUFFIXES:
            items.extend(read_table_texts(file, text_column))
        else:
            items.append(decode_text(file.read_bytes(), str(file)))
    return items


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


# ----------------------------------------------------------------------------- cleaning
def normalise(text: str) -> str:
    """Line endings to LF, Unicode to NFC, runs of spaces/tabs to one space."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return _SPACES.sub(" ", text)


def join_paragraph(block: str) -> str:
    """Join hard-wrapped lines of one paragraph into one line of text."""
    return " ".join(line.strip() for line in block.split("\n") if line.strip())


def split_paragraphs(text: str) -> list[str]:
    """Cleaned paragraphs of a text: a blank line ends a paragraph, wrapped lines are joined."""
    return [p for p in (join_paragraph(b) for b in _BLANK_LINE.split(normalise(text))) if p]


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_chars``, at the last space before the limit.

    Walks by index (no copies of the remainder), so a 100 MB line costs one pass.
    """
    if len(text) <= max_chars:
        return [text]
    pieces, start = [], 0
    while len(text) - start > max_chars:
        cut = text.rfind(" ", start + max_chars // 2, start + max_chars + 1)
        cut = cut if cut > start else start + max_chars
        pieces.append(text[start:cut].strip())
        start = cut
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def clean_documents(
    items: Iterable[RawText], min_chars: int = 20, deduplicate: bool = True, max_chars: int = 100_000
) -> tuple[pd.DataFrame, CleaningReport]:
    """Clean raw texts into documents: a frame with ``source``, ``text`` and ``doc_hash``."""
    report = CleaningReport()
    seen: set[str] = set()
    sources, texts, hashes = [], [], []
    for item in items:
        report.raw_items += 1
        report.replaced_bytes += item.replaced_bytes
        if item.source not in report.per_source:
            report.per_source[item.source] = 0
        paragraphs = (
            [join_paragraph(normalise(item.text))] if item.is_document else split_paragraphs(item.text)
        )
        for paragraph in (piece for p in paragraphs for piece in chunk_text(p, max_chars)):
            if len(paragraph) < min_chars:
                report.dropped_short += 1
                continue
            digest = document_hash(paragraph)
            if deduplicate:
                if digest in seen:
                    report.dropped_duplicates += 1
                    continue
                seen.add(digest)
            sources.append(item.source)
            texts.append(paragraph)
            hashes.append(digest)
            report.per_source[item.source] += 1
    report.sources = len(report.per_source)
    frame = pd.DataFrame({"source": sources, "text": texts, "doc_hash": hashes})
    return frame, report


# ----------------------------------------------------------------------------- splitting
def document_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def validate_split_ratios(ratios: dict[str, float]) -> dict[str, float]:
    unknown = set(ratios) - set(SPLITS)
    if unknown:
        raise ValueError(f"corpus.split_ratios: unknown split(s) {sorted(unknown)}; use {SPLITS}")
    values = {name: float(ratios.get(name, 0.0)) for name in SPLITS}
    if any(v < 0 for v in values.values()) or abs(sum(values.values()) - 1.0) > 1e-6:
        raise ValueError(
            f"corpus.split_ratios: {values} must be non-negative and sum to 1 "
            f"(they sum to {sum(values.values()):.4f})"
        )
    if values["train"] <= 0:
        raise ValueError("corpus.split_ratios: train must be > 0")
    return values


def assign_splits(hashes: Sequence[str], ratios: dict[str, float], salt: str = "") -> list[str]:
    """Split by a hash of each document, not its position.

    A document's split depends only on its own text (and an optional salt), so the split is
    stable when the corpus grows or is re-ordered, and duplicates cannot straddle splits.
    """
    ratios = validate_split_ratios(ratios)
    train_edge = ratios["train"]
    valid_edge = train_edge + ratios["valid"]
    result = []
    for digest in hashes:
        key = hashlib.blake2b((salt + digest).encode(), digest_size=8).digest()
        u = int.from_bytes(key, "big") / 2**64
        result.append("train" if u < train_edge else "valid" if u < valid_edge else "test")
    return result


def corpus_stats(documents: pd.DataFrame, report: CleaningReport) -> pd.DataFrame:
    """One row per split plus ``all``: documents and characters, and the cleaning counts."""
    rows = []
    for name in (*SPLITS, "all"):
        part = documents if name == "all" else documents[documents["split"] == name]
        rows.append(
            {
                "split": name,
                "documents": int(len(part)),
                "characters": int(part["text"].str.len().sum()),
                "sources": int(part["source"].nunique()),
            }
        )
    stats = pd.DataFrame(rows)
    stats["replaced_bytes"] = report.replaced_bytes
    stats["duplicates_dropped"] = report.dropped_duplicates
    stats["short_dropped"] = report.dropped_short
    return stats

