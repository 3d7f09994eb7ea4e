"""The data path's versioned directory datasets: document shards, token store, sequence index.
Each loads a light handle that reads its files on demand. The document and token datasets save
*jobs*: the node describes the work, and the data is written here as it is produced, so it never
has to fit in memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from kedro.io.core import DatasetError

from bert_mlm.core.data.corpus import SPLITS
from bert_mlm.core.data.documents import DocumentShards, write_json
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.reuse import link_or_copy
from bert_mlm.core.tokens.sequences import SequenceIndex, SplitIndex
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.tokens.tokenization import EncodingJob
from bert_mlm.core.tokens.words import WORD_SCHEMES, words_path
from bert_mlm.datasets.directory import AtomicDirectoryDataset

TablePreview = dict  # kedro-viz renders a preview annotated with this name as a table


class _JobDirectoryDataset(AtomicDirectoryDataset):
    def _run(self, job, check) -> None:
        """Run ``job`` into a new version, or reuse a stored one made by the same recipe (``check``ed)."""
        try:
            self._write_reusing(job.write, job.recipe(), job.data.reuse, check)
        except ValueError as error:  # a UserError (CorpusError among them) or a library's value error
            # One line naming the parameter or file, not "Failed while saving data to dataset ...".
            raise DatasetError(str(error)) from error


class DocumentShardsDataset(_JobDirectoryDataset):
    """Cleaned documents as Parquet shards per split (``text``, ``source``, ``doc_hash``)."""

    def load(self) -> DocumentShards:
        return DocumentShards(self._load_dir())

    def save(self, data: DocumentStream) -> None:
        self._run(data, check=lambda directory: DocumentShards(directory).check_readable())

    def preview(self, nrows: int = 10) -> TablePreview:
        shards = self.load()
        split = next((s for s in SPLITS if shards.row_groups(s)), "train")
        part, group = shards.row_groups(split)[0]
        frame = shards.read(part, group, ("source", "text")).slice(0, nrows).to_pandas()
        frame["text"] = frame["text"].str.slice(0, 200)
        return frame.astype(str).to_dict(orient="split")


class TokenStoreDataset(_JobDirectoryDataset):
    """The encoded corpus: a memory-mapped flat token array and document offsets per split."""

    def load(self) -> TokenStore:
        return TokenStore(self._load_dir())

    def save(self, data: EncodingJob) -> None:
        self._run(data, check=lambda directory: (store := TokenStore(directory)).verify(SPLITS, store.vocab_size))

    def preview(self) -> TablePreview:
        store = self.load()
        rows = [{"split": split, **store.manifest["splits"][split], "dtype": store.dtype.name,
                 "bytes_per_token": store.dtype.itemsize} for split in SPLITS]
        return pd.DataFrame(rows).to_dict(orient="split")


class SequenceIndexDataset(AtomicDirectoryDataset):
    """Where each model-input sequence lies in the token store: three small arrays per split."""

    FIELDS = ("starts", "counts", "add_sep")

    def load(self) -> SequenceIndex:
        return self._load_from(self._load_dir())

    def _load_from(self, directory: Path) -> SequenceIndex:
        try:
            manifest = json.loads((directory / "manifest.json").read_text())
            splits = {
                split: SplitIndex(*(np.load(directory / f"{split}.{name}.npy", mmap_mode="r") for name in self.FIELDS))
                for split in manifest["splits"]
            }
        except (OSError, ValueError, KeyError) as error:
            raise DatasetError(f"sequence_index: {str(directory)!r} is incomplete or damaged ({error})") from error
        for split, index in splits.items():
            if not len(index.starts) == len(index.counts) == len(index.add_sep) == manifest["splits"][split]:
                raise DatasetError(f"sequence_index: the arrays of the {split} split in {str(directory)!r} disagree")
        words, segmenter = None, manifest.get("word_segmenter", "wordpiece")
        scheme = manifest.get("word_scheme", WORD_SCHEMES.get(segmenter))  # indexes before schemes: jieba's first
        if manifest.get("word_bits"):
            if scheme != WORD_SCHEMES.get(segmenter):
                raise DatasetError(f"sequence_index: {str(directory)!r} holds {segmenter} word bits of scheme "
                                   f"{scheme}, which this version does not read (it makes scheme "
                                   f"{WORD_SCHEMES.get(segmenter)}); run the sequences pipeline again")
            words = {}
            for split, count in manifest["word_bits"].items():
                path = words_path(directory, split)
                if not path.is_file() or path.stat().st_size != (count + 7) // 8:
                    raise DatasetError(f"sequence_index: {str(path)!r} is missing or truncated")
                words[split] = np.memmap(path, dtype=np.uint8, mode="r") if count else np.zeros(0, np.uint8)
        sources = [(name, int(first)) for name, first in manifest["sources"]] if manifest.get("sources") else None
        return SequenceIndex(manifest["mode"], manifest["max_length"], splits, manifest["store_digests"],
                             segmenter, words, word_scheme=scheme if words is not None else None, sources=sources)

    def save(self, data: SequenceIndex) -> None:
        def fill(directory: Path) -> None:
            directory.mkdir(parents=True)
            for split, index in data.splits.items():
                for name in self.FIELDS:
                    np.save(directory / f"{split}.{name}.npy", np.ascontiguousarray(getattr(index, name)))
            for split, (source, _) in (data.word_files or {}).items():  # the encoding stage's bits, beside it
                link_or_copy(source, words_path(directory, split))  # (a link where it can)
            word_bits = None if data.word_files is None else {split: n for split, (_, n) in data.word_files.items()}
            write_json(directory / "manifest.json", {
                "mode": data.mode, "max_length": data.max_length, "store_digests": data.store_digests,
                "splits": {split: len(index) for split, index in data.splits.items()},
                "word_segmenter": data.word_segmenter, "word_bits": word_bits,
                "word_scheme": data.word_scheme if word_bits is not None else None,
                "sources": data.sources,
            })

        arrays = sum(getattr(index, name).nbytes for index in data.splits.values() for name in self.FIELDS)
        arrays += sum((count + 7) // 8 for _, count in (data.word_files or {}).values())
        self._write_reusing(fill, data.recipe, data.reuse, self._load_from, needed=arrays)
