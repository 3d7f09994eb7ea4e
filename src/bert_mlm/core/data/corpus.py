"""Corpus cleaning, paragraph joining, de-duplication and the hash split (reading: ``sources``).

Everything here is Kedro-free. A *document* is one cleaned paragraph of running text (a
blank-line separated block of a text file, one row of a table, one docstring paragraph of the
built-in corpus). Documents are the unit of de-duplication and of the train/valid/test split.

The corpus streams: :meth:`bert_mlm.core.data.sources.CorpusSource.batches` reads files and tables in
bounded chunks (text files are cut at paragraph boundaries, tables by rows), :func:`clean_batch` turns one chunk into
documents (a pure function, so it runs on worker processes or Dask workers), and
:func:`stream_documents` de-duplicates and splits them in input order. Memory is bounded by a
chunk, plus 8 bytes per distinct document for exact de-duplication.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bert_mlm.config.corpus import SPLITS, validate_split_ratios
from bert_mlm.core.common.text import UNSPACED, has_words, hash_unit
from bert_mlm.errors import UserError

TEXT_SUFFIXES = (".txt", ".raw", ".text", ".md")
# .json: JSON Lines (one object per line), as most dumps named .json are.
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".json")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + TABLE_SUFFIXES
BUILTIN_SOURCE = "builtin:python-stdlib-docstrings"

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_SPACES = re.compile(r"[^\S\n]+")
# Control characters other than newline and tab mark binary data (or mojibake), not text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class CorpusError(UserError):
    """A corpus input that cannot be used; the message names the parameter or the file."""


@dataclass
class RawText:
    """Text of one source before cleaning, with how many bytes were undecodable."""

    source: str
    text: str
    replaced_bytes: int = 0
    # A table row is one document already; a text file is split into paragraphs.
    is_document: bool = False
    # False for the second and later chunks of a text file (raw items count files and rows).
    starts_source: bool = True
    # The source's name in a mixture (corpus.sources); "" otherwise.
    origin: str = ""
    # A text file whose every non-empty line is a paragraph (corpus.line_by_line).
    line_by_line: bool = False


@dataclass
class CleaningReport:
    sources: int = 0
    raw_items: int = 0
    replaced_bytes: int = 0
    dropped_short: int = 0
    dropped_duplicates: int = 0
    per_source: dict[str, int] = field(default_factory=dict)


# ----------------------------------------------------------------------------- cleaning
def normalise(text: str) -> str:
    """Line endings to LF, Unicode to NFC, runs of spaces/tabs to one space."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return _SPACES.sub(" ", text)


# A line break between two characters of a script written without spaces joins them without one.
_UNSPACED_BREAK = re.compile(f"(?<=[{UNSPACED}])\n(?=[{UNSPACED}])")


def join_paragraph(block: str) -> str:
    """Join hard-wrapped lines of one paragraph into one line of text: with a space, except between
    two characters of a script written without spaces."""
    joined = "\n".join(line.strip() for line in block.split("\n") if line.strip())
    return _UNSPACED_BREAK.sub("", joined).replace("\n", " ")


def split_paragraphs(text: str, line_by_line: bool = False) -> list[str]:
    """Cleaned paragraphs of a text: a blank line ends a paragraph and wrapped lines are joined,
    or with ``line_by_line`` every non-empty line is one."""
    blocks = normalise(text).split("\n") if line_by_line else _BLANK_LINE.split(normalise(text))
    return [p for p in (join_paragraph(b) for b in blocks) if p]


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


def in_pieces(items: Iterable, max_size: int, size: Callable = len) -> Iterator[list]:
    """``items`` in consecutive lists of about ``max_size`` (each item's ``size``), at least one item each."""
    piece, total = [], 0
    for item in items:
        piece.append(item)
        total += size(item)
        if total >= max_size:
            yield piece
            piece, total = [], 0
    if piece:
        yield piece


@dataclass
class CleanedBatch:
    """Documents cleaned from one raw batch, before de-duplication (picklable: crosses processes)."""

    sources: list[str]
    texts: list[str]
    hashes: np.ndarray  # uint64: the first 8 bytes of each text's blake2b digest
    splits: np.ndarray  # uint8 index into SPLITS
    utf8_bytes: np.ndarray  # int64
    raw_items: int = 0
    replaced_bytes: int = 0
    dropped_short: int = 0
    sources_seen: tuple[str, ...] = ()
    origins: list[str] = field(default_factory=list)  # each document's source name in a mixture
    read_bytes: int = 0  # the raw text's UTF-8 bytes (progress, when a worker read it)

    def take(self, indices: np.ndarray) -> CleanedBatch:
        """The documents at ``indices`` (the batch's counts stay with the batch)."""
        return replace(self, sources=[self.sources[i] for i in indices], texts=[self.texts[i] for i in indices],
                       hashes=self.hashes[indices], splits=self.splits[indices], utf8_bytes=self.utf8_bytes[indices],
                       origins=[self.origins[i] for i in indices])


def clean_batch(items: Sequence[RawText], min_words: int = 4, max_chars: int = 100_000,
                ratios: dict[str, float] | None = None, salt: str = "", train_only: Sequence[str] = ()) -> CleanedBatch:
    """Clean one batch of raw texts into documents, each with its hash and split.

    A pure function of its arguments (no state across batches), so batches can be cleaned on any
    worker in any order and the result does not depend on which. The split is drawn from a hash of
    the document's text (and ``salt``), not its position: stable when the corpus grows or is
    re-ordered, and duplicates cannot straddle splits. ``train_only``: mixture sources (their
    ``origin``) whose documents outside the train split are left out (``corpus.replay``'s general
    text: the held-out splits stay the domain's, and its own held-out side unseen).
    """
    shares = validate_split_ratios(ratios or {"train": 1.0})
    edges = np.array([shares["train"], shares["train"] + shares["valid"]])
    sources, origins, texts, hashes, sizes = [], [], [], [], []
    dropped_short = replaced = 0
    for item in items:
        replaced += item.replaced_bytes
        paragraphs = ([join_paragraph(normalise(item.text))] if item.is_document
                      else split_paragraphs(item.text, item.line_by_line))
        for paragraph in (piece for p in paragraphs for piece in chunk_text(p, max_chars)):
            if not paragraph if item.is_document else not has_words(paragraph, min_words):
                dropped_short += 1  # a table row only when it is empty
                continue
            encoded = paragraph.encode("utf-8")
            sources.append(item.source)
            origins.append(item.origin)
            texts.append(paragraph)
            hashes.append(int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest(), "big"))
            sizes.append(len(encoded))
    splits = np.searchsorted(edges, [hash_unit(f"{salt}{h:016x}") for h in hashes], side="right").astype(np.uint8)
    if train_only:
        keep = [k for k, (origin, split) in enumerate(zip(origins, splits, strict=True))
                if split == 0 or origin not in train_only]
        sources, origins, texts = ([values[k] for k in keep] for values in (sources, origins, texts))
        hashes, sizes, splits = [hashes[k] for k in keep], [sizes[k] for k in keep], splits[keep]
    return CleanedBatch(sources, texts, np.asarray(hashes, dtype=np.uint64), splits, np.asarray(sizes, dtype=np.int64),
                        raw_items=sum(1 for item in items if item.starts_source), replaced_bytes=replaced,
                        dropped_short=dropped_short, sources_seen=tuple(dict.fromkeys(item.source for item in items)),
                        origins=origins)


class Deduplicator:
    """Exact de-duplication by 8-byte hashes: 8 bytes of memory per distinct document.

    The seen hashes are kept as a few sorted NumPy runs (merged when they multiply), so a
    batch is checked with vectorised binary searches instead of a Python set (which costs ~70
    bytes a document). Two different documents share a 64-bit hash with probability about
    n^2 / 2^65: ~3e-6 for 10 million documents.
    """

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []
        self.size = 0

    def first_occurrences(self, hashes: np.ndarray) -> np.ndarray:
        """A boolean mask of ``hashes`` never seen before (the first of equal ones in the batch)."""
        keep = np.zeros(len(hashes), dtype=bool)
        if not len(hashes):
            return keep
        unique, first = np.unique(hashes, return_index=True)
        new = np.ones(len(unique), dtype=bool)
        for run in self._runs:
            position = np.searchsorted(run, unique).clip(max=len(run) - 1)
            new &= run[position] != unique
        keep[first[new]] = True
        if new.any():
            self._runs.append(unique[new])
            self.size += len(self._runs[-1])
            # Keep run sizes roughly geometric: O(log n) runs to search, amortised O(n log n) merging.
            while len(self._runs) > 1 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
                last = self._runs.pop()
                self._runs[-1] = np.union1d(self._runs[-1], last)
        return keep


def stream_documents(cleaned: Iterable[CleanedBatch], deduplicate: bool, report: CleaningReport
                     ) -> Iterator[CleanedBatch]:
    """De-duplicate cleaned batches in their order, counting into ``report`` as they pass.

    Yields each batch with only its kept documents (input order; ``splits`` says where each goes).
    """
    seen = Deduplicator() if deduplicate else None
    for batch in cleaned:
        report.raw_items += batch.raw_items
        report.replaced_bytes += batch.replaced_bytes
        report.dropped_short += batch.dropped_short
        for source in batch.sources_seen:
            report.per_source.setdefault(source, 0)
        if seen is not None:
            keep = np.flatnonzero(seen.first_occurrences(batch.hashes))
            report.dropped_duplicates += len(batch.hashes) - len(keep)
            if len(keep) < len(batch.hashes):
                batch = batch.take(keep)
        for source in batch.sources:
            report.per_source[source] += 1
        yield batch
    report.sources = len(report.per_source)


def clean_documents(items: Iterable[RawText], min_words: int = 4, deduplicate: bool = True, max_chars: int = 100_000,
                    ratios: dict[str, float] | None = None, salt: str = "") -> tuple[pd.DataFrame, CleaningReport]:
    """Clean raw texts into an in-memory frame (``source``, ``text``, ``doc_hash``, ``split``):
    for small corpora (an extra evaluation corpus, tests). Large corpora stream through
    :func:`stream_documents` into document shards instead."""
    report = CleaningReport()
    [batch] = stream_documents([clean_batch(list(items), min_words, max_chars, ratios, salt)], deduplicate, report)
    return pd.DataFrame({"source": batch.sources, "text": batch.texts, "doc_hash": [f"{h:016x}" for h in batch.hashes],
                         "split": [SPLITS[c] for c in batch.splits]}), report


