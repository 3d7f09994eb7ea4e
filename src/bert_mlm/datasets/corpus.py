"""The raw corpus as a (load-only) Kedro dataset: user files (local or remote, compressed or not),
a Hugging Face dataset, a mixture of sources, or the built-in offline corpus."""

from __future__ import annotations

from typing import Any

from kedro.io import AbstractDataset, DatasetError

from bert_mlm.config.corpus import check_one_source, with_replay
from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.data.sources import CorpusSource, HFDataset, mixture_source, storage_options_of

_EMPTY = (None, "", "null", "None")


class CorpusDataset(AbstractDataset[Any, CorpusSource]):
    """The user's corpus, loaded as a :class:`CorpusSource`: where the texts are, checked (listed,
    credentials and packages present), not the texts themselves (the ingestion node streams them).

    ``path``, ``hf_dataset``, ``sources`` and ``replay`` are the ``corpus`` section's keys (the
    catalog fills them from the ``corpus.*`` parameters, so ``--params corpus.path=...`` switches
    the corpus), with ``credentials`` and ``fs_args`` resolved by Kedro for the file system. None
    of them: the built-in corpus when ``builtin_when_empty``, else no corpus (an optional extra one).
    """

    def __init__(self, path: str | None = None, text_column: str = "text", builtin_when_empty: bool = True,
                 builtin_max_files: int | None = None, credentials: dict[str, Any] | None = None,
                 fs_args: dict[str, Any] | None = None, hf_dataset: dict[str, Any] | str | None = None,
                 sources: dict[str, Any] | list | None = None, replay: dict[str, Any] | None = None,
                 parameter: str = "corpus.path", metadata: dict[str, Any] | None = None):
        self._path = str(path) if path not in _EMPTY else None
        self._hf_dataset = None if hf_dataset in _EMPTY else hf_dataset
        self._sources = None if sources in _EMPTY else sources
        self._replay = None if replay in _EMPTY else replay
        self._text_column, self._parameter, self.metadata = text_column, parameter, metadata
        self._builtin_when_empty, self._builtin_max_files = builtin_when_empty, builtin_max_files
        self._storage_options = storage_options_of(credentials, fs_args, parameter)
        self._loaded: CorpusSource | None = None

    def load(self) -> CorpusSource:
        """The source, listed and checked once per catalog: the run plan's size estimate, the checks
        before the run and the ingestion node share it (a remote listing or a Hugging Face dataset's
        loading is not done again)."""
        if self._loaded is None:
            check_one_source(self._path, self._hf_dataset, self._sources)
            sources = with_replay(self._path, self._hf_dataset, self._sources, self._replay, self._text_column,
                                  self._storage_options)  # the same mixture the parameters make of corpus.replay
            if sources is not None:
                source = mixture_source(sources, self._text_column)
            else:
                source = CorpusSource(self._path, self._text_column, self._builtin_when_empty, self._builtin_max_files,
                                      storage_options=self._storage_options, parameter=self._parameter,
                                      hf_dataset=None if self._hf_dataset is None else
                                      HFDataset.from_mapping(self._hf_dataset))
            source.check()  # a missing path, an empty listing, a refused key fail here, in one line
            self._loaded = source
        return self._loaded

    def save(self, data: Any) -> None:
        raise DatasetError("CorpusDataset is read-only: it reads the user's corpus")

    def _describe(self) -> dict[str, Any]:
        # Never the sources' mappings: they hold resolved credentials.
        sources = f"mixture of {sorted(self._sources)}" if isinstance(self._sources, dict) else None
        where = (redact_text(self._path) if self._path else None) or self._hf_dataset or sources
        return {"path": where or ("<built-in>" if self._builtin_when_empty else None), "text_column": self._text_column}
