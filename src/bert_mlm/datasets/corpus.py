"""The raw corpus as a (load-only) Kedro dataset: user files or the built-in offline corpus."""

from __future__ import annotations

from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError

from bert_mlm.core.corpus import builtin_corpus, read_corpus


class CorpusDataset(AbstractDataset[Any, pd.DataFrame]):
    """Reads ``path`` (a text file, a directory, or a glob of ``.txt``/``.raw``/``.csv``/
    ``.parquet``/``.jsonl`` files) into a frame of raw texts: ``source``, ``text``,
    ``replaced_bytes`` and ``is_document`` (table rows are documents already).

    With an empty ``path``, loads the built-in corpus (Python standard-library docstrings) when
    ``builtin_when_empty`` is true, else an empty frame (an optional extra corpus).
    The catalog fills ``path`` from the ``corpus.path`` runtime parameter, so
    ``kedro run --params corpus.path=...`` switches the corpus.
    """

    def __init__(
        self,
        path: str | None = None,
        text_column: str = "text",
        builtin_when_empty: bool = True,
        builtin_max_files: int | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        self._path = str(path) if path not in (None, "", "null", "None") else None
        self._text_column = text_column
        self._builtin_when_empty = builtin_when_empty
        self._builtin_max_files = builtin_max_files
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        if self._path is None:
            items = builtin_corpus(self._builtin_max_files) if self._builtin_when_empty else []
        else:
            items = read_corpus(self._path, self._text_column)
        return pd.DataFrame(
            {
                "source": [i.source for i in items],
                "text": [i.text for i in items],
                "replaced_bytes": [i.replaced_bytes for i in items],
                "is_document": [i.is_document for i in items],
            }
        )

    def save(self, data: Any) -> None:
        raise DatasetError("CorpusDataset is read-only: it reads the user's corpus")

    def _describe(self) -> dict[str, Any]:
        return {"path": self._path or ("<built-in>" if self._builtin_when_empty else None), "text_column": self._text_column}
