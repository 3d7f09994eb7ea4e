"""Document shards: the cleaned corpus on disk, per split, in Parquet files of bounded size.

Layout of one shard directory::

    manifest.json                 counts per split, cleaning counts, the settings that made it
    train/part-00000.parquet      columns text (string), source (dictionary), doc_hash (uint64),
                                  origin (dictionary: the source's name in a mixture, else "")
    train/part-00001.parquet ...
    valid/part-00000.parquet
    test/part-00000.parquet

The writer holds one row group per split in memory; the reader yields row groups. Nothing
here holds the corpus.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bert_mlm.core.common.progress import Progress
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.corpus import SPLITS, CleanedBatch, CleaningReport, CorpusError
from bert_mlm.core.data.reuse import recipe_identity

MANIFEST = "manifest.json"
FORMAT = "bert-mlm-document-shards"
FORMAT_VERSION = 1
ROW_GROUP_BYTES = 8 << 20
PART_BYTES = 256 << 20
SCHEMA = pa.schema([("text", pa.string()), ("source", pa.dictionary(pa.int32(), pa.string())),
                    ("doc_hash", pa.uint64()), ("origin", pa.dictionary(pa.int32(), pa.string()))])


@dataclass
class SplitCounts:
    documents: int = 0
    characters: int = 0
    utf8_bytes: int = 0
    sources: set[str] = field(default_factory=set)


class DocumentShardWriter:
    """Appends cleaned batches to per-split Parquet parts under ``directory`` (which must be new).

    Call :meth:`close` with the cleaning report to write the manifest; the directory is complete
    only then (the Kedro dataset writes it under a temporary name and renames it).
    """

    def __init__(self, directory: str | os.PathLike, row_group_bytes: int = ROW_GROUP_BYTES,
                 part_bytes: int = PART_BYTES):
        self.directory, self.row_group_bytes, self.part_bytes = Path(directory), row_group_bytes, part_bytes
        self.directory.mkdir(parents=True, exist_ok=False)
        self.counts = {split: SplitCounts() for split in SPLITS}
        self._pending: dict[str, list[CleanedBatch]] = {split: [] for split in SPLITS}
        self._pending_bytes = dict.fromkeys(SPLITS, 0)
        self._writers: dict[str, pq.ParquetWriter | None] = dict.fromkeys(SPLITS)
        self._part_bytes = dict.fromkeys(SPLITS, 0)
        self._parts: dict[str, list[str]] = {split: [] for split in SPLITS}
        # A mixture's training documents per source, in the order the sources were read: each
        # source's documents lie together, one run after the other (the token store's ranges).
        self.train_sources: dict[str, SplitCounts] = {}

    def _count_train_sources(self, part: CleanedBatch) -> None:
        # By runs of one origin (a batch outside a mixture is one run): no Python step per document.
        for origin, run in itertools.groupby(zip(part.origins, part.texts, strict=True), key=operator.itemgetter(0)):
            if origin not in self.train_sources:
                self.train_sources[origin] = SplitCounts()
            elif origin != next(reversed(self.train_sources)):
                raise CorpusError(f"corpus.sources.{origin}: its documents came back after another source's; "
                                  "the sources of a mixture must be read one after the other")
            texts = [text for _, text in run]
            counts = self.train_sources[origin]
            counts.documents += len(texts)
            counts.characters += sum(map(len, texts))

    def write(self, batch: CleanedBatch) -> None:
        for code, split in enumerate(SPLITS):
            chosen = np.flatnonzero(batch.splits == code)
            if not len(chosen):
                continue
            part = batch.take(chosen)
            if split == "train":
                self._count_train_sources(part)
            counts = self.counts[split]
            counts.documents += len(chosen)
            counts.characters += sum(map(len, part.texts))
            size = int(part.utf8_bytes.sum())
            counts.utf8_bytes += size
            counts.sources.update(part.sources)
            # A row group ends at the document that fills it, wherever batches end: the files are a
            # function of the documents alone (engines that cut the corpus differently write the same bytes).
            while len(part.texts):
                filled = self._pending_bytes[split] + np.cumsum(part.utf8_bytes)
                full = np.flatnonzero(filled >= self.row_group_bytes)
                cut = int(full[0]) + 1 if len(full) else len(part.texts)
                head = part.take(np.arange(cut)) if cut < len(part.texts) else part
                self._pending[split].append(head)
                self._pending_bytes[split] += int(head.utf8_bytes.sum())
                if self._pending_bytes[split] >= self.row_group_bytes:
                    self._flush(split)
                part = part.take(np.arange(cut, len(part.texts))) if cut < len(part.texts) else part.take(np.arange(0))

    def _flush(self, split: str) -> None:
        pending = self._pending[split]
        if not pending:
            return
        table = pa.table({
            "text": pa.array([t for p in pending for t in p.texts], pa.string()),
            "source": pa.array([s for p in pending for s in p.sources], pa.string()).dictionary_encode(),
            "doc_hash": pa.array(np.concatenate([p.hashes for p in pending]), pa.uint64()),
            "origin": pa.array([o for p in pending for o in p.origins], pa.string()).dictionary_encode(),
        }, schema=SCHEMA)
        writer = self._writers[split]
        if writer is None:
            name = f"{split}/part-{len(self._parts[split]):05d}.parquet"
            (self.directory / split).mkdir(exist_ok=True)
            writer = self._writers[split] = pq.ParquetWriter(self.directory / name, SCHEMA, compression="zstd")
            self._parts[split].append(name)
            self._part_bytes[split] = 0
        writer.write_table(table, row_group_size=len(table))
        self._part_bytes[split] += self._pending_bytes[split]
        self._pending[split], self._pending_bytes[split] = [], 0
        if self._part_bytes[split] >= self.part_bytes:
            writer.close()
            self._writers[split] = None

    def close(self, report: CleaningReport, settings: dict, sources: list[str] | None = None) -> dict:
        """``sources``: a mixture's source names (``corpus.sources``), whose training documents are
        counted in the manifest; their weights are not the data's but training's (sampled per epoch)."""
        for split in SPLITS:
            self._flush(split)
            if self._writers[split] is not None:
                self._writers[split].close()
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "splits": {split: {"documents": c.documents, "characters": c.characters, "utf8_bytes": c.utf8_bytes,
                               "sources": len(c.sources), "parts": self._parts[split]}
                       for split, c in self.counts.items()},
            "cleaning": {"raw_items": report.raw_items, "sources": report.sources,
                         "replaced_bytes": report.replaced_bytes, "duplicates_dropped": report.dropped_duplicates,
                         "short_dropped": report.dropped_short,
                         "all_sources": sorted({s for c in self.counts.values() for s in c.sources})},
            "settings": settings,
        }
        if sources is not None:
            empty = [name for name in sources if name not in self.train_sources]
            if empty:
                raise CorpusError(f"corpus.sources.{empty[0]}: none of its documents landed in the train split, so it "
                                  "cannot take a share of training (a source that repeats another's documents loses "
                                  "them to corpus.deduplicate); give it text or remove it")
            manifest["sources"] = {name: {"train_documents": counts.documents, "train_characters": counts.characters}
                                   for name, counts in self.train_sources.items()}
        manifest = redact(manifest)  # a corpus URL's password or signature never reaches the file
        write_json(self.directory / MANIFEST, manifest)
        return manifest

    def abort(self) -> None:
        for writer in self._writers.values():
            if writer is not None:
                writer.close()


def write_json(path: Path, data: dict) -> None:
    """Write and fsync: a manifest is the last file of a directory and vouches for the rest."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, default=_json_default)
        handle.flush()
        os.fsync(handle.fileno())


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def read_manifest(directory: Path, expected_format: str, name: str) -> dict:
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise CorpusError(f"{name}: {str(path)!r} is missing; the directory {str(directory)!r} is incomplete"
                          ) from error
    except ValueError as error:
        raise CorpusError(f"{name}: {str(path)!r} is not valid JSON (truncated?): {error}") from error
    if manifest.get("format") != expected_format:
        raise CorpusError(f"{name}: {str(directory)!r} is not a {expected_format} directory")
    return manifest


class DocumentShards:
    """Read access to a document shard directory: counts, and texts by row group."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory, FORMAT, "corpus_documents")
        self._files: dict[str, pq.ParquetFile] = {}  # each part's footer is read once
        for split in SPLITS:
            for part in self.manifest["splits"][split]["parts"]:
                if not (self.directory / part).is_file():
                    raise CorpusError(f"corpus_documents: the shard {str(self.directory / part)!r} is missing")

    def __reduce__(self):
        return (DocumentShards, (str(self.directory),))

    @property
    def sources(self) -> dict[str, dict] | None:
        """A mixture's sources (``corpus.sources``) in the order their training documents lie, with
        their training documents and characters; ``None`` without a mixture."""
        return self.manifest.get("sources")

    def documents(self, split: str) -> int:
        return int(self.manifest["splits"][split]["documents"])

    def characters(self, split: str) -> int:
        return int(self.manifest["splits"][split]["characters"])

    def utf8_bytes(self, split: str) -> int:
        return int(self.manifest["splits"][split]["utf8_bytes"])

    @property
    def identity(self) -> str:
        """What the next stages' recipes name this version by: the digest of the recipe it was made
        by (two versions made alike are one input), or of its manifest (versions made before recipes)."""
        return recipe_identity(self.directory) or hashlib.blake2b(
            (self.directory / MANIFEST).read_bytes(), digest_size=10).hexdigest()

    def check_readable(self) -> None:
        """Every shard's Parquet footer reads (a reused version is checked first)."""
        for split in SPLITS:
            for part in self.manifest["splits"][split]["parts"]:
                self._open(part)

    def row_groups(self, split: str) -> list[tuple[str, int]]:
        """(part, row group) pairs of a split, in document order: the unit of parallel work."""
        return [(part, g) for part in self.manifest["splits"][split]["parts"]
                for g in range(self._open(part).num_row_groups)]

    def _open(self, part: str) -> pq.ParquetFile:
        if part not in self._files:
            try:
                self._files[part] = pq.ParquetFile(self.directory / part)
            except (OSError, pa.ArrowInvalid) as error:
                raise CorpusError(f"corpus_documents: the shard {str(self.directory / part)!r} is truncated or not "
                                  f"Parquet: {error}") from error
        return self._files[part]

    def read(self, part: str, row_group: int, columns: tuple[str, ...] = ("text",)) -> pa.Table:
        return self._open(part).read_row_group(row_group, columns=list(columns))

    def texts(self, part: str, row_group: int) -> list[str]:
        return self.read(part, row_group).column("text").to_pylist()

    def iter_texts(self, split: str, sample_fraction: float | None = None,
                   progress: Progress | None = None) -> Iterator[list[str]]:
        """The texts of a split, a row group at a time (counted in characters into ``progress``
        once read). With ``sample_fraction``, a fixed subset of about that share of the documents,
        evenly spread over the whole split (not its first files): document ``j`` is taken when
        ``frac(j * golden ratio) < sample_fraction``."""
        position = 0
        for part, group in self.row_groups(split):
            texts = self.texts(part, group)
            count = len(texts)
            if sample_fraction is not None and sample_fraction < 1:
                keys = sample_key(np.arange(position, position + count))
                texts = [texts[i] for i in np.flatnonzero(keys < sample_fraction)]
            position += count
            yield texts
            if progress is not None:
                progress.update(characters(texts))

    def iter_source_texts(self, split: str) -> Iterator[tuple[str, list[str]]]:
        """The texts of a split with the source they came from (``""`` outside a mixture): each
        item holds one source's documents, in order (a row group where two sources meet is cut there)."""
        for part, group in self.row_groups(split):
            if self.sources is None:
                yield "", self.texts(part, group)
                continue
            table = self.read(part, group, ("text", "origin"))
            pairs = zip(table.column("origin").to_pylist(), table.column("text").to_pylist(), strict=True)
            for origin, run in itertools.groupby(pairs, key=operator.itemgetter(0)):
                yield origin, [text for _, text in run]

    def sample_texts(self, split: str, max_chars: int) -> list[str]:
        """The split's first texts, about ``max_chars`` characters (a look at its language)."""
        sample, size = [], 0
        for part, group in self.row_groups(split):
            for text in self.texts(part, group):
                sample.append(text[: max_chars - size])
                size += len(sample[-1])
                if size >= max_chars:
                    return sample
        return sample

    def frame(self, split: str | None = None) -> pd.DataFrame:
        """Documents as one frame (``split``, ``source``, ``text``): for small corpora and notebooks."""
        frames = []
        for name in SPLITS if split is None else (split,):
            for part in self.manifest["splits"][name]["parts"]:
                table = pq.read_table(self.directory / part, columns=["source", "text"])
                frames.append(table.to_pandas().astype({"source": str}).assign(split=name))
        if not frames:
            return pd.DataFrame({"source": [], "text": [], "split": []})
        return pd.concat(frames, ignore_index=True)[["split", "source", "text"]]

    def stats(self) -> pd.DataFrame:
        """One row per split plus ``all``: documents, characters, sources; the cleaning counts (the
        corpus's, on ``all`` only); and a mixture's sources (``train:<name>``), their training
        documents and characters as stored (once each: the weights apply when training samples its epochs)."""
        splits, cleaning = self.manifest["splits"], self.manifest["cleaning"]
        rows = [{"split": s, **{k: splits[s][k] for k in ("documents", "characters", "sources")}} for s in SPLITS]
        totals = {k: cleaning[k] for k in ("replaced_bytes", "duplicates_dropped", "short_dropped")}
        rows.append({"split": "all", **{k: sum(r[k] for r in rows) for k in ("documents", "characters")},
                     "sources": len(cleaning["all_sources"]), **totals})
        rows += [{"split": f"train:{name}", "source": name, **info} for name, info in (self.sources or {}).items()]
        return pd.DataFrame(rows).astype(dict.fromkeys(totals, "Int64"))


def sample_key(positions: np.ndarray) -> np.ndarray:
    """A low-discrepancy value in [0, 1) per document position (a Weyl sequence): any share of
    documents taken by ``key < share`` is spread evenly over the split."""
    return np.modf(positions.astype(np.float64) * 0.6180339887498949)[0]



def characters(texts: list[str]) -> int:
    return sum(map(len, texts))
