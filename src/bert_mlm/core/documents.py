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

import functools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.corpus import SPLITS, CleanedBatch, CleaningReport, CorpusError, clean_batch, stream_documents
from bert_mlm.core.engine import DaskEngine, open_engine
from bert_mlm.core.progress import Progress
from bert_mlm.core.sources import CorpusSource, ReadTask, read_task, read_tasks

MANIFEST = "manifest.json"
FORMAT = "bert-mlm-document-shards"
FORMAT_VERSION = 1
ROW_GROUP_BYTES = 8 << 20
PART_BYTES = 256 << 20
SCHEMA = pa.schema(
    [("text", pa.string()), ("source", pa.dictionary(pa.int32(), pa.string())), ("doc_hash", pa.uint64()),
     ("origin", pa.dictionary(pa.int32(), pa.string()))]
)


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

    def __init__(
        self, directory: str | os.PathLike, row_group_bytes: int = ROW_GROUP_BYTES, part_bytes: int = PART_BYTES
    ):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=False)
        self.row_group_bytes = row_group_bytes
        self.part_bytes = part_bytes
        self.counts = {split: SplitCounts() for split in SPLITS}
        self._pending: dict[str, list[CleanedBatch]] = {split: [] for split in SPLITS}
        self._pending_bytes = dict.fromkeys(SPLITS, 0)
        self._writers: dict[str, pq.ParquetWriter | None] = dict.fromkeys(SPLITS)
        self._part_bytes = dict.fromkeys(SPLITS, 0)
        self._parts: dict[str, list[str]] = {split: [] for split in SPLITS}

    def write(self, batch: CleanedBatch) -> None:
        for code, split in enumerate(SPLITS):
            chosen = np.flatnonzero(batch.splits == code)
            if not len(chosen):
                continue
            part = batch.take(chosen)
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
        table = pa.table(
            {
                "text": pa.array([t for p in pending for t in p.texts], pa.string()),
                "source": pa.array([s for p in pending for s in p.sources], pa.string()).dictionary_encode(),
                "doc_hash": pa.array(np.concatenate([p.hashes for p in pending]), pa.uint64()),
                "origin": pa.array([o for p in pending for o in p.origins], pa.string()).dictionary_encode(),
            },
            schema=SCHEMA,
        )
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

    def close(self, report: CleaningReport, settings: dict, mixture: dict | None = None) -> dict:
        for split in SPLITS:
            self._flush(split)
            if self._writers[split] is not None:
                self._writers[split].close()
        manifest = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "splits": {
                split: {
                    "documents": c.documents,
                    "characters": c.characters,
                    "utf8_bytes": c.utf8_bytes,
                    "sources": len(c.sources),
                    "parts": self._parts[split],
                }
                for split, c in self.counts.items()
            },
            "cleaning": {
                "raw_items": report.raw_items,
                "sources": report.sources,
                "replaced_bytes": report.replaced_bytes,
                "duplicates_dropped": report.dropped_duplicates,
                "short_dropped": report.dropped_short,
                "all_sources": sorted({s for c in self.counts.values() for s in c.sources}),
            },
            "settings": settings,
        }
        if mixture is not None:
            manifest["mixture"] = mixture_plan(self.directory, self._parts["train"], mixture)
        write_json(self.directory / MANIFEST, manifest)
        return manifest

    def abort(self) -> None:
        for writer in self._writers.values():
            if writer is not None:
                writer.close()


def repeat_counts(factors: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """How many times each document enters the training stream: ``floor(f)``, plus one more for an
    evenly spread ``frac(f)`` share of its source's documents (``positions``: each document's
    index among its source's training documents; a Weyl sequence picks them, so the share is
    exact to a document or two, where a random pick would miss by its standard error)."""
    whole = np.floor(factors)
    return (whole + (sample_key(positions) < factors - whole)).astype(np.int64)


def source_positions(codes: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Each document's index among its source's documents so far (``seen``: per source, updated)."""
    positions = np.empty(len(codes), dtype=np.int64)
    for code in np.unique(codes):
        where = np.flatnonzero(codes == code)
        positions[where] = seen[code] + np.arange(len(where))
        seen[code] += len(where)
    return positions


def train_columns(directory: Path, train_parts: list[str], names: list[str]):
    """Per row group of the train split: each document's source code, characters and UTF-8 bytes
    (one row group at a time: memory stays flat)."""
    code_of = {name: code for code, name in enumerate(names)}
    for part in train_parts:
        parquet = pq.ParquetFile(directory / part)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=["origin", "text"])
            codes = np.array([code_of[o] for o in table.column("origin").to_pylist()], dtype=np.int64)
            text = table.column("text")
            yield (codes, pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64),
                   pc.binary_length(text).to_numpy(zero_copy_only=False).astype(np.int64))


def mixture_plan(directory: Path, train_parts: list[str], sources: dict[str, dict]) -> dict:
    """Each source's factor (passes over its training documents) and the training stream's counts.

    With weights, a source's factor is ``weight * C / c`` (``c``: its training characters, ``C``:
    all sources'), so its share of the stream's characters is its weight, and the stream keeps
    about the corpus's size (the encoder then balances tokens: ``token_store.token_balanced_factors``).
    With ``repeat``, the factor is the repeat. Passes over the train split's source and length
    columns count the stream exactly (the rule :meth:`DocumentShards.iter_texts` applies).
    """
    names = list(sources)
    row_groups = functools.partial(train_columns, directory, train_parts, names)  # read twice: memory stays flat

    raw_docs, raw_chars = np.zeros(len(names), np.int64), np.zeros(len(names), np.int64)
    for codes, lengths, _ in row_groups():
        raw_docs += np.bincount(codes, minlength=len(names))
        raw_chars += np.bincount(codes, weights=lengths, minlength=len(names)).astype(np.int64)
    weights = np.array([sources[n]["weight"] or 0.0 for n in names])
    if weights.sum() > 0:
        empty = [n for n, c in zip(names, raw_chars, strict=True) if c == 0]
        if empty:
            raise CorpusError(f"corpus.sources.{empty[0]}: none of its documents landed in the train split, "
                              "so it cannot take a share of training; give it text or remove it")
        factors = weights / weights.sum() * raw_chars.sum() / raw_chars
    else:
        factors = np.array([sources[n]["repeat"] or 1.0 for n in names])
    return {
        "sources": {
            name: {"weight": sources[name]["weight"], "repeat": sources[name]["repeat"],
                   "train_documents": int(raw_docs[i]), "train_characters": int(raw_chars[i])}
            for i, name in enumerate(names)
        },
        **stream_plan(row_groups, names, factors),
    }


def stream_plan(row_groups, names: list[str], factors: np.ndarray) -> dict:
    """The training stream's counts with these ``factors``: per source and in all."""
    docs, chars, utf8_total = np.zeros(len(names), np.int64), np.zeros(len(names), np.int64), 0
    seen = np.zeros(len(names), np.int64)
    for codes, lengths, utf8 in row_groups():
        counts = repeat_counts(factors[codes], source_positions(codes, seen))
        docs += np.bincount(codes, weights=counts, minlength=len(names)).astype(np.int64)
        chars += np.bincount(codes, weights=counts * lengths, minlength=len(names)).astype(np.int64)
        utf8_total += int((counts * utf8).sum())
    total = max(int(chars.sum()), 1)
    return {
        "factors": {name: float(factors[i]) for i, name in enumerate(names)},
        "stream": {
            name: {
                "documents": int(docs[i]),
                "characters": int(chars[i]),
                "share_of_characters": float(chars[i] / total),
            }
            for i, name in enumerate(names)
        },
        "train": {"documents": int(docs.sum()), "characters": int(chars.sum()), "utf8_bytes": utf8_total},
    }


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
        raise CorpusError(
            f"{name}: {str(path)!r} is missing; the directory {str(directory)!r} is incomplete"
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
    def mixture(self) -> dict | None:
        """The mixture's plan (``corpus.sources``): each source's factor and share; ``None`` without one."""
        return self.manifest.get("mixture")

    def _counts(self, split: str) -> dict:
        # A mixture's train split is read as its weighted stream: what tokenization sees.
        if split == "train" and self.mixture is not None:
            return self.mixture["train"]
        return self.manifest["splits"][split]

    def documents(self, split: str) -> int:
        return int(self._counts(split)["documents"])

    def characters(self, split: str) -> int:
        return int(self._counts(split)["characters"])

    def utf8_bytes(self, split: str) -> int:
        return int(self._counts(split)["utf8_bytes"])

    def row_groups(self, split: str) -> list[tuple[str, int]]:
        """(part, row group) pairs of a split, in document order: the unit of parallel work."""
        groups = []
        for part in self.manifest["splits"][split]["parts"]:
            groups.extend((part, g) for g in range(self._open(part).num_row_groups))
        return groups

    def _open(self, part: str) -> pq.ParquetFile:
        if part in self._files:
            return self._files[part]
        path = self.directory / part
        try:
            opened = self._files[part] = pq.ParquetFile(path)
            return opened
        except (OSError, pa.ArrowInvalid) as error:
            raise CorpusError(
                f"corpus_documents: the shard {str(path)!r} is truncated or not Parquet: {error}"
            ) from error

    def read(self, part: str, row_group: int, columns: tuple[str, ...] = ("text",)) -> pa.Table:
        return self._open(part).read_row_group(row_group, columns=list(columns))

    def texts(self, part: str, row_group: int) -> list[str]:
        return self.read(part, row_group).column("text").to_pylist()

    def iter_texts(self, split: str, sample_fraction: float | None = None,
                   progress: Progress | None = None, origins: list | None = None,
                   factors: dict[str, float] | None = None) -> Iterator[list[str]]:
        """The texts of a split, a row group at a time (counted in characters into ``progress``).
        With ``sample_fraction``, a fixed subset of about that share of the documents, evenly
        spread over the whole split (not its first files): document ``j`` is taken when
        ``frac(j * golden ratio) < sample_fraction``.

        A mixture's train split is its weighted stream: pass ``r`` over the split takes the
        documents that enter it more than ``r`` times (:func:`repeat_counts`); each yielded list
        holds one source's documents, and ``origins`` (a list) receives that source's name.
        ``factors`` replace the plan's (the encoder balances tokens, not characters).
        """
        plan = self.mixture if split == "train" else None
        names = list(plan["sources"]) if plan else []
        factors = factors or (plan["factors"] if plan else None)
        factor_array = np.array([factors[n] for n in names]) if plan else None
        passes = int(np.ceil(factor_array.max())) if plan else 1
        code_of = {name: code for code, name in enumerate(names)}
        position = 0
        for repetition in range(passes):
            seen = np.zeros(len(names), np.int64)
            for part, group in self.row_groups(split):
                if plan:
                    table = self.read(part, group, ("text", "origin"))
                    codes = np.array([code_of[o] for o in table.column("origin").to_pylist()], dtype=np.int64)
                    taken = repeat_counts(factor_array[codes], source_positions(codes, seen)) > repetition
                    all_texts = table.column("text").to_pylist()
                    runs = [(code, [all_texts[i] for i in np.flatnonzero(taken & (codes == code))])
                            for code in dict.fromkeys(codes[taken].tolist())]
                else:
                    runs = [(None, self.texts(part, group))]
                for code, texts in runs:
                    count = len(texts)
                    if progress is not None:
                        progress.update(sum(map(len, texts)))
                    if sample_fraction is not None and sample_fraction < 1:
                        keys = sample_key(np.arange(position, position + count))
                        texts = [texts[i] for i in np.flatnonzero(keys < sample_fraction)]
                    position += count
                    if origins is not None and code is not None:
                        origins.append(names[code])
                    yield texts

    def source_samples(self, max_chars: int) -> dict[str, list[str]]:
        """The first training documents of each source of a mixture, about ``max_chars`` each."""
        names = list(self.mixture["sources"])
        samples: dict[str, list[str]] = {name: [] for name in names}
        sizes = dict.fromkeys(names, 0)
        for part, group in self.row_groups("train"):
            wanted = {
                o for o in self.read(part, group, ("origin",)).column("origin").to_pylist() if sizes[o] < max_chars
            }
            if not wanted:
                continue
            table = self.read(part, group, ("text", "origin"))
            for text, origin in zip(table.column("text").to_pylist(), table.column("origin").to_pylist(), strict=True):
                if origin in wanted and sizes[origin] < max_chars:
                    samples[origin].append(text)
                    sizes[origin] += len(text)
            if all(size >= max_chars for size in sizes.values()):
                break
        return samples

    def source_stats(self) -> pd.DataFrame | None:
        """A mixture's sources: training documents and characters before and after weighting,
        weight or repeat, factor, and share of the training stream (``None`` without a mixture)."""
        if self.mixture is None:
            return None
        plan = self.mixture
        return pd.DataFrame(
            [
                {
                    "source": name,
                    **info,
                    "factor": plan["factors"][name],
                    **{f"stream_{k}": v for k, v in plan["stream"][name].items()},
                }
                for name, info in plan["sources"].items()
            ]
        )

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
        """One row per split plus ``all``: documents, characters, sources, and the cleaning counts."""
        splits = self.manifest["splits"]
        cleaning = self.manifest["cleaning"]
        rows = [
            {"split": s, "documents": splits[s]["documents"], "characters": splits[s]["characters"],
             "sources": splits[s]["sources"]}
            for s in SPLITS
        ]
        rows.append(
            {"split": "all", "documents": sum(r["documents"] for r in rows),
             "characters": sum(r["characters"] for r in rows), "sources": len(cleaning["all_sources"])}
        )
        stats = pd.DataFrame(rows)
        stats["replaced_bytes"] = cleaning["replaced_bytes"]
        stats["duplicates_dropped"] = cleaning["duplicates_dropped"]
        stats["short_dropped"] = cleaning["short_dropped"]
        return stats


def sample_key(positions: np.ndarray) -> np.ndarray:
    """A low-discrepancy value in [0, 1) per document position (a Weyl sequence): any share of
    documents taken by ``key < share`` is spread evenly over the split."""
    return np.modf(positions.astype(np.float64) * 0.6180339887498949)[0]


def read_and_clean(task: ReadTask, *cleaning) -> CleanedBatch:
    """One piece of the corpus, read and cleaned where it runs (a Dask worker)."""
    items = read_task(task)
    batch = clean_batch(items, *cleaning)
    batch.read_bytes = sum(len(item.text.encode("utf-8", "replace")) for item in items)
    return batch


def counted(batches: Iterable[CleanedBatch], progress: Progress) -> Iterator[CleanedBatch]:
    for batch in batches:
        progress.update(batch.read_bytes)
        yield batch


def write_document_shards(
    directory: str | os.PathLike, batches: Iterable[CleanedBatch], report: CleaningReport, settings: dict,
    row_group_bytes: int = ROW_GROUP_BYTES, mixture: dict | None = None,
) -> dict:
    """Drain ``batches`` into a new shard directory; returns the manifest."""
    writer = DocumentShardWriter(directory, row_group_bytes=row_group_bytes)
    try:
        for batch in batches:
            writer.write(batch)
        return writer.close(report, settings, mixture)
    except BaseException:
        writer.abort()
        raise


@dataclass
class DocumentStream:
    """The cleaned, de-duplicated, split corpus, produced while it is written.

    The ingestion node returns one of these instead of the documents; the catalog's shard
    dataset calls :meth:`write`, so the corpus flows from the source files into shards without
    ever being held in memory.
    """

    source: CorpusSource
    config: CorpusConfig
    data: DataConfig
    report: CleaningReport = field(default_factory=CleaningReport)

    def write(self, directory: str | os.PathLike) -> dict:
        config = self.config
        self.report = CleaningReport()  # a retried write counts afresh
        total = self.source.total_bytes()
        progress = Progress(total, "ingestion", unit="B")

        def raw_batches():
            for batch in self.source.batches(self.data.chunk_bytes, config.line_by_line):
                progress.update(sum(len(item.text.encode("utf-8", "replace")) for item in batch))
                yield batch

        settings = {
            "source": self.source.describe(),
            "text_column": self.source.text_column,
            "corpus": config.model_dump(),
        }
        cleaning = (config.min_words, config.max_document_chars, dict(config.split_ratios), config.split_salt)
        try:
            with open_engine(self.data) as engine:
                if isinstance(engine, DaskEngine):
                    # Workers read their pieces from wherever the files are: the client lists them only
                    # (local files too, on a LocalCluster; a remote scheduler's workers get their texts).
                    tasks = read_tasks(self.source, self.data.chunk_bytes, line_by_line=config.line_by_line,
                                       local_files=self.data.scheduler_address is None)
                    cleaned = counted(engine.map_ordered(read_and_clean, tasks, *cleaning), progress)
                else:
                    cleaned = engine.map_ordered(clean_batch, raw_batches(), *cleaning)
                manifest = write_document_shards(
                    directory, stream_documents(cleaned, config.deduplicate, self.report), self.report, settings,
                    row_group_bytes=self.data.chunk_bytes, mixture=self.source.mixture(),
                )
        finally:
            progress.close()
        splits = manifest["splits"]
        documents = sum(s["documents"] for s in splits.values())
        if documents == 0:
            raise CorpusError(
                f"corpus.path: the corpus is empty after cleaning ({self.report.raw_items} raw item(s), "
                f"{self.report.dropped_short} with fewer than corpus.min_words={config.min_words} words, or empty rows)"
            )
        if splits["train"]["documents"] == 0:
            raise CorpusError(
                f"corpus.path: the corpus is too small: none of its {documents} document(s) landed in "
                "the train split (corpus.split_ratios); add text"
            )
        for split, use in (("valid", "tuning"), ("test", "evaluation")):
            ratio = float(dict(config.split_ratios).get(split, 0.0))
            if ratio > 0 and splits[split]["documents"] == 0:
                # Found now, not after tuning and training: the held-out splits are fixed here.
                raise CorpusError(
                    f"corpus.path: none of the corpus's {documents} document(s) landed in the {split} split "
                    f"(corpus.split_ratios.{split}={ratio}), which {use} needs. Documents are paragraphs (split at "
                    f"blank lines, and at corpus.max_document_chars={config.max_document_chars}) and are assigned "
                    "to splits by their hash: give more text or more paragraphs"
                )
        return manifest
