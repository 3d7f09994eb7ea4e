"""A Hugging Face dataset as a corpus: from the Hub (streamed, so memory stays flat) or a directory
written by ``save_to_disk`` (memory-mapped); a row of its text column a document."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.data.corpus import CorpusError, RawText
from bert_mlm.core.data.sources.tables import not_text, text_documents
from bert_mlm.errors import first_line


@dataclass(frozen=True)
class HFDataset:
    """``name`` (a Hub id), ``config`` and ``split`` (default ``train``), or ``path`` (a
    ``save_to_disk`` directory; ``split`` picks one of a ``DatasetDict``'s)."""

    name: str | None = None
    config: str | None = None
    split: str | None = None
    text_column: str = "text"
    path: str | None = None
    revision: str | None = None
    streaming: bool = True
    parameter: str = field(default="corpus.hf_dataset", compare=False)  # named in messages

    @classmethod
    def from_mapping(cls, value, parameter: str = "corpus.hf_dataset") -> HFDataset:
        value = {"name": value} if isinstance(value, str) else value
        if not isinstance(value, dict):
            raise CorpusError(f"{parameter}: {value!r} must be a mapping with name (a Hub id) or path (save_to_disk)")
        keys = [f.name for f in fields(cls) if f.compare]  # the settings (not ``parameter``)
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise CorpusError(f"{parameter}: unknown key(s) {unknown}; use {keys}")
        spec = cls(**{k: v for k, v in value.items() if v is not None}, parameter=parameter)
        if (spec.name is None) == (spec.path is None):
            raise CorpusError(f"{parameter}: give exactly one of name (a Hub dataset id) or path (a save_to_disk "
                              "directory)")
        return spec

    def describe(self) -> str:
        if self.path is not None:
            return f"hf-disk:{self.path}"
        return f"hf:{self.name}" + (f"/{self.config}" if self.config else "") + f"[{self.split or 'train'}]"

    def open(self):
        """The dataset's split, checked (exists, has a text column) without reading its rows."""
        try:
            import datasets
        except ImportError as error:
            raise CorpusError(f'{self.parameter}: reading Hugging Face datasets needs the datasets package; '
                              f'install it with pip install "bert_mlm[hf]"') from error
        try:
            dataset = self._from_disk(datasets) if self.path is not None else datasets.load_dataset(
                self.name, self.config, split=self.split or "train", revision=self.revision, streaming=self.streaming)
        except CorpusError:
            raise
        except Exception as error:  # offline, unknown id, bad config: one line, as model.init_from does
            offline = (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")
                       or isinstance(error, ConnectionError) or "connect" in str(error).lower())
            hint = (" (offline, and not in the local cache: download it where the Hub is reachable, or "
                    "save_to_disk it there and give corpus.hf_dataset.path)") if self.name and offline else ""
            raise CorpusError(f"{self.parameter}: {self.describe()} could not be loaded{hint}: "
                              f"{type(error).__name__}: {redact_text(first_line(error))}") from error
        columns = dataset.column_names  # None for some streamed datasets: checked when read
        if columns is not None and self.text_column not in columns:
            raise CorpusError(f"{self.parameter}.text_column: column {self.text_column!r} does not exist in "
                              f"{self.describe()}; its columns are {columns}")
        feature = (getattr(dataset, "features", None) or {}).get(self.text_column)
        if feature is not None and not (isinstance(feature, datasets.Value) and "string" in feature.dtype):
            kind = f"{getattr(feature, 'dtype', type(feature).__name__)} values"
            raise not_text(f"{self.parameter}.text_column", self.text_column, self.describe(), kind)
        return dataset

    def _from_disk(self, datasets):
        path, split = Path(self.path).expanduser(), self.split or "train"
        if not path.is_dir():
            raise CorpusError(f"{self.parameter}.path: {self.path!r} is not a directory (one written by save_to_disk)")
        dataset = datasets.load_from_disk(str(path))
        if not isinstance(dataset, datasets.DatasetDict):
            if self.split is not None:
                raise CorpusError(f"{self.parameter}.split: {self.split!r} was given, but {self.path!r} holds one "
                                  f"dataset without splits; remove {self.parameter}.split")
            return dataset
        if split not in dataset:
            raise CorpusError(f"{self.parameter}.split: {split!r} is not a split of {self.path!r}; it has "
                              f"{sorted(dataset)}")
        return dataset[split]

    def texts(self, rows: int = 1000) -> Iterator[RawText]:
        where = f"{self.parameter}.text_column"
        for batch in self.open().iter(batch_size=rows):  # a streamed dataset without features is checked here
            yield from text_documents(batch[self.text_column], self.describe(), self.text_column, where)
