"""The raw corpus as a (load-only) Kedro dataset: user files or the built-in offline corpus."""

from __future__ import annotations

from typing import Any

from kedro.io import AbstractDataset, DatasetError

from bert_mlm.core.corpus import CorpusError
from bert_mlm.core.sources import CorpusSource

READER_PARAMETER = "corpus.path"  # the name the corpus reader's messages give the path


class CorpusDataset(AbstractDataset[Any, CorpusSource]):
    """The user's corpus at ``path`` (a text file, a directory, or a glob of ``.txt``/``.raw``/
    ``.csv``/``.parquet``/``.jsonl`` files), loaded as a :class:`CorpusSource`: where the texts
    are, checked to exist, not the texts themselves (the ingestion node streams them).

    With an empty ``path``: the built-in corpus (Python standard-library docstrings) when
    ``builtin_when_empty`` is true, else no corpus (an optional extra corpus).
    The catalog fills ``path`` from the ``corpus.path`` runtime parameter, so
    ``kedro run --params corpus.path=...`` switches the corpus. ``parameter``: the name the path
    has in the parameters, for messages (the extra evaluation corpus is ``evaluation.corpus_path``).
    """

    def __init__(
        self,
        path: str | None = None,
        text_column: str = "text",
        builtin_when_empty: bool = True,
        builtin_max_files: int | None = None,
        parameter: str = READER_PARAMETER,
        metadata: dict[str, Any] | None = None,
    ):
        self._path = str(path) if path not in (None, "", "null", "None") else None
        self._text_column = text_column
        self._builtin_when_empty = builtin_when_empty
        self._builtin_max_files = builtin_max_files
        self._parameter = parameter
        self.metadata = metadata

    def load(self) -> CorpusSource:
        source = CorpusSource(self._path, self._text_column, self._builtin_when_empty, self._builtin_max_files)
        try:
            source.files()  # a missing path or a directory without corpus files fails here, named
        except CorpusError as error:
            message = str(error)
            if self._parameter == READER_PARAMETER or not message.startswith(f"{READER_PARAMETER}:"):
                raise
            raise CorpusError(self._parameter + message.removeprefix(READER_PARAMETER)) from error
        return source

    def save(self, data: Any) -> None:
        raise DatasetError("CorpusDataset is read-only: it reads the user's corpus")

    def _describe(self) -> dict[str, Any]:
        return {"path": self._path or ("<built-in>" if self._builtin_when_empty else None), "text_column": self._text_column}
