"""Tables as documents: the text column of ``.csv``/``.tsv``/``.parquet``/``.jsonl`` files (compressed
or not), a row a document, a bounded number of rows at a time."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.data.corpus import CorpusError, RawText
from bert_mlm.core.data.sources.listing import CorpusFile, format_suffix, source_name
from bert_mlm.core.data.sources.streams import decode_text, open_corpus_file, open_raw
from bert_mlm.errors import first_line

TABLE_CHUNK_ROWS = 20_000


def open_parquet(file: CorpusFile, storage_options: dict | None = None) -> pq.ParquetFile:
    """A Parquet file, read at random (footer first, then row groups), local or remote."""
    return pq.ParquetFile(file if isinstance(file, Path) else open_raw(file, storage_options))


def text_documents(values: Iterable, source: str, column: str, where: str = "corpus.text_column") -> list[RawText]:
    """Non-null values of a text column as documents, bytes decoded as UTF-8; a value that is not
    text is one error."""
    documents = []
    for value in values:
        if isinstance(value, str):
            documents.append(RawText(source, value, is_document=True))
        elif isinstance(value, bytes):
            documents.append(decode_text(value, source, False, is_document=True))
        elif value is not None:
            raise not_text(where, column, source, f"non-text values such as {value!r}")
    return documents


def not_text(where: str, column: str, source: str, kind: str) -> CorpusError:
    return CorpusError(f"{where}: column {column!r} of {source!r} holds {kind}, not text")


def missing_column(column: str, source: str, columns) -> CorpusError:
    return CorpusError(f"corpus.text_column: column {column!r} does not exist in {source!r}; "
                       f"its columns are {list(map(str, columns))}")


def iter_table_rows(file: CorpusFile, text_column: str, chunk_rows: int = TABLE_CHUNK_ROWS,
                    storage_options: dict | None = None) -> Iterator[list[RawText]]:
    """The ``text_column`` of a table, ``chunk_rows`` rows at a time (:func:`text_documents`)."""
    source, suffix, rows = source_name(file), format_suffix(str(file)), 0
    read = {".parquet": _parquet, ".csv": _delimited, ".tsv": _delimited}.get(suffix, _json_lines)
    try:
        for values in read(file, text_column, chunk_rows, storage_options, source):
            rows += len(values)
            yield text_documents(values, source, text_column)
    except CorpusError:
        raise
    except Exception as error:  # pandas and pyarrow raise many types; the user needs the file name
        raise CorpusError(f"corpus file {source!r} could not be read as {suffix} after {rows:,} row(s): "
                          f"{redact_text(first_line(error))}") from error


def _parquet(file, column, chunk_rows, storage_options, source) -> Iterator[list]:
    parquet = open_parquet(file, storage_options)
    if column not in parquet.schema_arrow.names:
        raise missing_column(column, source, parquet.schema_arrow.names)
    kind = parquet.schema_arrow.field(column).type
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    if kind not in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        raise not_text("corpus.text_column", column, source, f"{kind} values")
    for batch in parquet.iter_batches(batch_size=chunk_rows, columns=[column]):
        yield batch.column(0).to_pylist()


def _delimited(file, column, chunk_rows, storage_options, source) -> Iterator[list]:
    # TSV as written by most tools (GLUE, spreadsheets): tab-separated, no quoting.
    options = {"sep": "\t", "quoting": csv.QUOTE_NONE} if format_suffix(str(file)) == ".tsv" else {}
    with open_corpus_file(file, storage_options) as handle:
        columns = list(pd.read_csv(handle, nrows=0, encoding_errors="replace", **options).columns)
    if column not in columns:
        raise missing_column(column, source, columns)
    with open_corpus_file(file, storage_options) as handle:
        for frame in pd.read_csv(handle, dtype=str, keep_default_na=False, encoding_errors="replace",
                                 usecols=[column], chunksize=chunk_rows, **options):
            yield frame[column].tolist()


def _json_lines(file, column, chunk_rows, storage_options, source) -> Iterator[list]:
    # json.loads line by line: 1.7x faster than pandas' chunked reader (BENCHMARKS.md "Compressed
    # corpora"), and a bad line is named by its number. Rows need not share keys.
    keys: set[str] | None = set()  # the keys seen, until a row has the column
    values: list = []
    with open_corpus_file(file, storage_options) as raw:
        for number, line in enumerate(io.TextIOWrapper(io.BufferedReader(raw), "utf-8", errors="replace"), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise CorpusError(f"corpus file {source!r}, line {number}: not valid JSON ({error.msg} at column "
                                  f"{error.colno})") from error
            if not isinstance(row, dict):
                raise CorpusError(f"corpus file {source!r}, line {number}: a JSON {type(row).__name__}, not an "
                                  "object with a text field")
            if keys is not None:
                keys = None if column in row else keys | row.keys()
            values.append(row.get(column))
            if len(values) >= chunk_rows:
                yield values
                values = []
    if keys is not None:
        raise missing_column(column, source, sorted(keys))
    yield values
