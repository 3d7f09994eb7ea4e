"""Ingestion: the corpus read, cleaned, de-duplicated and split, written as document shards while it
is read (:class:`DocumentStream`), locally on all cores or on Dask workers (core/data/engine.py)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.data.corpus import CleanedBatch, CleaningReport, CorpusError, clean_batch, stream_documents
from bert_mlm.core.data.documents import DocumentShardWriter
from bert_mlm.core.data.engine import DaskEngine, Finished, open_engine
from bert_mlm.core.data.reuse import code_digest, source_fingerprint
from bert_mlm.core.data.sources import CorpusSource, ReadTask, read_task, read_tasks


def raw_bytes(items: list) -> int:
    """The UTF-8 size of a batch of raw texts (ingestion's progress counts what it read)."""
    return sum(len(item.text.encode("utf-8", "replace")) for item in items)


def read_and_clean(task: ReadTask, *cleaning) -> CleanedBatch:
    """One piece of the corpus, read and cleaned where it runs (a Dask worker)."""
    items = read_task(task)
    batch = clean_batch(items, *cleaning)
    batch.read_bytes = raw_bytes(items)
    return batch


def counted(batches: Iterable[CleanedBatch], progress: Progress) -> Iterator[CleanedBatch]:
    for batch in batches:
        progress.update(batch.read_bytes)
        yield batch


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

    @property
    def train_only(self) -> tuple[str, ...]:
        """The mixture sources read for their train split only (corpus.replay's general text)."""
        return tuple(part.name for part in self.source.parts if part.train_only)

    def recipe(self) -> dict | None:
        """What determines the shards (core/data/reuse.py): the corpus files (sizes and times, not read),
        the cleaning and split settings, the chunk size (it places the row groups) and the code.
        A mixture's weights are not in it: they are training's. ``None``: a corpus whose content
        cannot be told without reading it (read every run)."""
        fingerprint = source_fingerprint(self.source)
        if fingerprint is None:
            return None
        # corpus.replay is a mixture source (in the fingerprint) and a share (training's, as weights are).
        read_by_catalog = ("path", "text_column", "credentials", "hf_dataset", "sources", "replay")
        return {"stage": "corpus_documents", "source": fingerprint, "chunk_bytes": self.data.chunk_bytes,
                **({"train_only": self.train_only} if self.train_only else {}),
                "code": code_digest("bert_mlm.core.data.corpus", "bert_mlm.core.data.documents",
                                    "bert_mlm.core.data.ingestion", "bert_mlm.core.data.sources"),
                "corpus": {k: v for k, v in self.config.model_dump().items() if k not in read_by_catalog}}

    def write(self, directory: str | os.PathLike) -> dict:
        config = self.config
        self.report = CleaningReport()  # a retried write counts afresh
        progress = Progress(self.source.total_bytes(), "ingestion", unit="B")
        cleaning = (config.min_words, config.max_document_chars, dict(config.split_ratios), config.split_salt,
                    self.train_only)
        writer = DocumentShardWriter(directory, row_group_bytes=self.data.chunk_bytes)
        try:
            with open_engine(self.data) as engine:
                if isinstance(engine, DaskEngine):
                    # Workers read their pieces from wherever the files are: the client lists them only
                    # (local files too, on a LocalCluster; a remote scheduler's workers get their texts).
                    tasks = read_tasks(self.source, self.data.chunk_bytes, line_by_line=config.line_by_line,
                                       local_files=self.data.scheduler_address is None)
                    cleaned = counted(engine.map_ordered(read_and_clean, tasks, *cleaning), progress)
                else:
                    batches = self.source.batches(self.data.chunk_bytes, config.line_by_line)
                    cleaned = engine.map_ordered(clean_batch, batches, *cleaning,
                                                 finished=Finished(progress, raw_bytes))
                for batch in stream_documents(cleaned, config.deduplicate, self.report):
                    writer.write(batch)
            settings = {"source": self.source.describe(), "text_column": self.source.text_column,
                        "corpus": config.model_dump()}
            # A mixture's source names, in the order they are read.
            manifest = writer.close(self.report, settings, [part.name for part in self.source.parts] or None)
        except BaseException:
            writer.abort()
            raise
        finally:
            progress.close()
        splits = manifest["splits"]
        documents = sum(s["documents"] for s in splits.values())
        if documents == 0:
            raise CorpusError(f"corpus.path: the corpus is empty after cleaning ({self.report.raw_items} raw item(s), "
                              f"{self.report.dropped_short} with fewer than corpus.min_words={config.min_words} words, "
                              "or empty rows)")
        if splits["train"]["documents"] == 0:
            raise CorpusError(f"corpus.path: the corpus is too small: none of its {documents} document(s) landed in "
                              "the train split (corpus.split_ratios); add text")
        for split, use in (("valid", "tuning"), ("test", "evaluation")):
            ratio = float(dict(config.split_ratios).get(split, 0.0))
            if ratio > 0 and splits[split]["documents"] == 0:
                # Found now, not after tuning and training: the held-out splits are fixed here.
                raise CorpusError(f"corpus.path: none of the corpus's {documents} document(s) landed in the {split} "
                                  f"split (corpus.split_ratios.{split}={ratio}), which {use} needs. Documents are "
                                  "paragraphs (split at blank lines, or each line with corpus.line_by_line=true, and "
                                  f"at corpus.max_document_chars={config.max_document_chars}) and are assigned to "
                                  "splits by their hash: give more text or more paragraphs, or read each line as one "
                                  "(corpus.line_by_line=true)")
        return manifest
