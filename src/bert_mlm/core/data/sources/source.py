"""Where a corpus is, as one value (:class:`CorpusSource`), and its raw texts streamed in batches of
bounded size; the built-in corpus (the documentation strings of the Python standard library)."""

from __future__ import annotations

import ast
import functools
import os
import sysconfig
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.data.corpus import BUILTIN_SOURCE, TABLE_SUFFIXES, CorpusError, RawText, in_pieces
from bert_mlm.core.data.sources.hf import HFDataset
from bert_mlm.core.data.sources.listing import CorpusFile, compression_of, format_suffix, list_corpus_files, source_name
from bert_mlm.core.data.sources.streams import READ_CHUNK_BYTES, decode_text, iter_text_file
from bert_mlm.core.data.sources.tables import iter_table_rows, text_documents
from bert_mlm.cpus import usable_cpus


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus is, not its text: a file, directory or glob (local or on any fsspec file system,
    compressed or not), a Hugging Face dataset, what a Kedro dataset loaded, the built-in corpus, or a
    mixture of named sources (``parts``). Loading it reads nothing but listings; :meth:`batches` streams."""

    path: str | None = None
    text_column: str = "text"
    builtin_when_empty: bool = True
    builtin_max_files: int | None = None
    storage_options: dict | None = None
    hf_dataset: HFDataset | None = None
    data: object = None  # what a Kedro dataset loaded (``iter_loaded_data``)
    parts: tuple[CorpusSource, ...] = ()
    name: str = ""  # the source's name in a mixture (its weight is training's: core.tokens.blend)
    parameter: str = "corpus.path"  # named in messages (the extra evaluation corpus has its own)
    train_only: bool = False  # a mixture's source read for its train split only (corpus.replay's general text)

    @property
    def is_empty(self) -> bool:
        """No corpus given, and no built-in one wanted (an optional extra corpus)."""
        given = self.path is not None or self.hf_dataset is not None or self.data is not None or self.parts
        return not given and not self.builtin_when_empty

    def describe(self) -> str:
        if self.parts:
            return " + ".join(f"{p.name}={p.describe()}" for p in self.parts)
        if self.hf_dataset is not None:
            return self.hf_dataset.describe()
        if self.data is not None:
            return "catalog:raw_corpus"
        if self.path is not None:
            return redact_text(self.path)
        return "built-in corpus" if self.builtin_when_empty else "none"

    @functools.cached_property
    def listing(self) -> list[tuple[CorpusFile, int | None]]:
        """The files and their sizes, listed once (a remote listing is a round trip, and its
        warning about skipped files is said once)."""
        return [] if self.path is None else list_corpus_files(self.path, self.storage_options, self.parameter)

    def files(self) -> list[CorpusFile]:
        return [file for file, _ in self.listing]

    def check(self) -> None:
        """Fail now, in one line, on what would fail later: a missing path, an empty listing,
        missing credentials or packages, an unknown dataset or column, a mixture's source twice."""
        for part in self.parts:
            part.check()
        check_distinct(self.parts)
        if self.path is not None:
            self.files()
        if self.hf_dataset is not None:
            self.hf_dataset.open()

    def check_first_texts(self) -> None:
        """Read the first batch of texts now, so that what fails on reading (a binary file, a table
        without its text column) fails before any work, not after training (an evaluation corpus)."""
        try:
            next(iter(self.batches()), None)
        except CorpusError as error:
            if str(error).startswith(self.parameter):
                raise
            raise CorpusError(f"{self.parameter}: {error}") from error

    def total_bytes(self) -> int | None:
        """The text's size for progress, when the listing knows it (uncompressed files only)."""
        if self.parts:
            sizes = [p.total_bytes() for p in self.parts]
            return None if None in sizes else sum(sizes)
        if self.path is None or any(size is None or compression_of(str(file)) for file, size in self.listing):
            return None
        return sum(size for _, size in self.listing)

    def batches(self, chunk_bytes: int = READ_CHUNK_BYTES, line_by_line: bool | str = "auto"
                ) -> Iterator[list[RawText]]:
        """The raw texts in batches of about ``chunk_bytes``, in a fixed order; ``line_by_line``:
        whether each line of a text file is a paragraph (``auto``: each file decides)."""
        if self.parts:
            return ([replace(item, origin=part.name) for item in batch]
                    for part in self.parts for batch in part.batches(chunk_bytes, line_by_line))
        if self.is_empty:
            return iter(())
        if self.hf_dataset is not None:
            return batched(self.hf_dataset.texts(), chunk_bytes)
        if self.data is not None:
            return batched(iter_loaded_data(self.data, self.text_column), chunk_bytes)
        if self.path is None:
            return batched(builtin_corpus(self.builtin_max_files), chunk_bytes)
        return iter_file_batches(self.files(), self.text_column, chunk_bytes, self.storage_options, line_by_line)


def check_distinct(parts: tuple[CorpusSource, ...]) -> None:
    """Refuse a mixture that reads the same text twice (the same path or dataset in two sources, or
    a file that two sources list): de-duplication would drop the second copy whole, and the second
    source would be left with nothing."""
    owner: dict = {}
    for part in parts:
        keys = ([(os.path.realpath(f) if isinstance(f, Path) else f, source_name(f)) for f in part.files()]
                if part.path is not None else [(part.hf_dataset, part.hf_dataset.describe())])
        for key, shown in keys:
            if key in owner and owner[key] != part.name:
                raise CorpusError(f"corpus.sources.{part.name}: {shown!r} is also a source of "
                                  f"corpus.sources.{owner[key]} (a duplicate: its documents would be dropped as "
                                  "copies of the first); give each file or dataset to one source")
            owner.setdefault(key, part.name)


def iter_file_batches(files: list[CorpusFile], text_column: str, chunk_bytes: int, storage_options: dict | None = None,
                      line_by_line: bool | str = "auto") -> Iterator[list[RawText]]:
    """Listed corpus files in batches of about ``chunk_bytes`` of text, in their order."""
    for file in files:
        if format_suffix(str(file)) in TABLE_SUFFIXES:
            rows = iter_table_rows(file, text_column, storage_options=storage_options)
            yield from batched((row for batch in rows for row in batch), chunk_bytes)
        else:
            yield from ([chunk] for chunk in iter_text_file(file, chunk_bytes, storage_options, line_by_line))


def iter_loaded_data(data, text_column: str, source: str = "catalog") -> Iterator[RawText]:
    """Texts of what a Kedro dataset loaded: a DataFrame (its ``text_column``, a row a document),
    a ``PartitionedDataset``'s partitions (loaded one at a time, in key order), a string (a text,
    split into paragraphs), bytes, or a list of any of these."""
    if isinstance(data, pd.DataFrame):
        if text_column not in data.columns:
            raise CorpusError(f"corpus.text_column: column {text_column!r} does not exist in the catalog's "
                              f"raw_corpus ({source}); its columns are {list(map(str, data.columns))}")
        yield from text_documents(data[text_column].dropna(), source, text_column)
    elif isinstance(data, dict):
        for key in sorted(data):
            value = data[key]
            yield from iter_loaded_data(value() if callable(value) else value, text_column, f"{source}/{key}")
    elif isinstance(data, str):
        yield RawText(source, data)
    elif isinstance(data, bytes):
        yield decode_text(data, source)
    elif hasattr(data, "__iter__"):  # a list (or any iterable) of the above
        for index, value in enumerate(data):
            yield from iter_loaded_data(value, text_column, source if isinstance(value, str) else f"{source}[{index}]")
    else:
        raise CorpusError(f"raw_corpus: the catalog loaded a {type(data).__name__}; a corpus is a DataFrame, "
                          "partitions, text or a list of texts")


def as_corpus_source(raw_corpus, text_column: str = "text") -> CorpusSource:
    """The ingestion's input as a source: the project's own corpus dataset, or whatever another
    Kedro dataset declared as ``raw_corpus`` in the catalog loaded (a DataFrame, partitions...)."""
    if isinstance(raw_corpus, CorpusSource):
        return raw_corpus
    return CorpusSource(data=raw_corpus, text_column=text_column, builtin_when_empty=False)


def batched(items: Iterable[RawText], chunk_bytes: int) -> Iterator[list[RawText]]:
    return in_pieces(items, chunk_bytes, lambda item: len(item.text))


def read_corpus(path: str | os.PathLike, text_column: str = "text") -> list[RawText]:
    """Every corpus file under ``path`` (file, directory or glob), in memory: for small corpora."""
    return [item for batch in CorpusSource(str(path), text_column).batches() for item in batch]


# ----------------------------------------------------------------------------- built-in corpus
STDLIB = Path(sysconfig.get_paths()["stdlib"])
_STDLIB_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__phello__"}


def _docstrings(node: ast.AST) -> list[str]:
    """The docstrings of a module, class or function and of those defined in it: depth first, in source order."""
    doc = ast.get_docstring(node, clean=True)
    return ([doc] if doc else []) + [text for child in getattr(node, "body", [])
                                     if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                                     for text in _docstrings(child)]


def _docstrings_of_file(path: str) -> list[str]:
    try:
        return _docstrings(ast.parse(Path(path).read_bytes()))
    except (SyntaxError, ValueError):
        return []


def builtin_corpus(max_files: int | None = None, workers: int | None = None) -> list[RawText]:
    """The documentation strings of the Python standard library (about 1.7 MB on 3.11).

    Parsed with ``ast`` rather than imported, so nothing runs and the result depends only on
    the Python version. Parsing is the slow part (about 10 s on one core), so it fans out over
    processes; the order of the result does not depend on the number of workers.
    """
    files = [p for p in sorted(STDLIB.rglob("*.py"))
             if not _STDLIB_SKIP_PARTS.intersection(p.relative_to(STDLIB).parts)][:max_files]
    workers = workers or min(len(files), usable_cpus())
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            per_file = list(pool.map(_docstrings_of_file, map(str, files), chunksize=8))
    else:
        per_file = [_docstrings_of_file(str(f)) for f in files]
    return [RawText(source=f"{BUILTIN_SOURCE}/{file.relative_to(STDLIB)}", text=doc)
            for file, docs in zip(files, per_file, strict=True) for doc in docs]
