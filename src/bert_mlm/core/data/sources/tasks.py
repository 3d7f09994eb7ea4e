"""The corpus as pieces that Dask workers read themselves, from wherever the files are (the client
lists files and reads their first bytes, but never funnels their text): byte ranges of text files,
row groups of Parquet files, whole other files, or texts the client already holds."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from bert_mlm.core.data.corpus import TEXT_SUFFIXES, RawText
from bert_mlm.core.data.sources import streams
from bert_mlm.core.data.sources.listing import CorpusFile, compression_of, format_suffix, source_name
from bert_mlm.core.data.sources.source import CorpusSource, iter_file_batches
from bert_mlm.core.data.sources.tables import open_parquet, text_documents


@dataclass(frozen=True)
class ReadTask:
    """A bounded piece of a corpus that a worker reads: a byte range of an uncompressed text file,
    a row group of a Parquet file, a whole other file, or texts the client already holds (the
    built-in corpus, a Hugging Face dataset, what a Kedro dataset loaded, a file of this machine)."""

    kind: str  # "range" | "row_group" | "file" | "items"
    file: CorpusFile | None = None
    storage_options: dict | None = None
    text_column: str = "text"
    origin: str = ""
    start: int = 0
    stop: int = 0
    chunk_bytes: int = streams.READ_CHUNK_BYTES
    items: tuple[RawText, ...] = ()
    line_by_line: bool = False  # decided by the client, from the file's head, once


def _boundary(handle, offset: int, size: int, chunk_bytes: int, line_by_line: bool) -> int:
    """The first paragraph end at or after ``offset`` (else, past ``4 * chunk_bytes``, the first
    space or newline). A function of the file's bytes from ``offset`` only, so the two tasks that
    share a range end agree on it."""
    if offset <= 0 or offset >= size:
        return max(0, min(offset, size))
    handle.seek(offset)
    window = b""
    while len(window) < 4 * chunk_bytes:
        block = handle.read(1 << 16)
        if not block:
            return size
        window += block
        # A paragraph end that may continue past the window's end is not taken until the window covers it.
        match = streams.PARAGRAPH_END[line_by_line].search(window, 0, max(0, len(window) - 64))
        if match:
            return offset + match.end()
    space = re.search(rb"[ \n]", window)
    return offset + (space.end() if space else len(window))


def read_task(task: ReadTask) -> list[RawText]:
    """Run one :class:`ReadTask`: the raw texts of its piece (on a worker)."""
    file = task.file
    if task.kind == "items":
        items = list(task.items)
    elif task.kind == "row_group":
        parquet = open_parquet(file, task.storage_options)
        column = parquet.read_row_group(task.start, columns=[task.text_column]).column(0)
        items = text_documents(column.to_pylist(), source_name(file), task.text_column)
    elif task.kind == "range":
        source = source_name(file)
        with streams.open_raw(file, task.storage_options) as handle:
            size = handle.seek(0, os.SEEK_END)
            if task.start == 0:
                handle.seek(0)
                streams.check_not_binary(handle.read(streams.HEAD_BYTES), source)
            begin = _boundary(handle, task.start, size, task.chunk_bytes, task.line_by_line)
            end = _boundary(handle, task.stop, size, task.chunk_bytes, task.line_by_line)
            handle.seek(begin)
            data = handle.read(max(0, end - begin))
        items = [streams.decode_text(data, source, False, starts_source=task.start == 0,
                                     line_by_line=task.line_by_line)] if data else []
    else:
        items = [item for batch in iter_file_batches([file], task.text_column, task.chunk_bytes, task.storage_options,
                                                     task.line_by_line) for item in batch]
    return [replace(item, origin=task.origin) for item in items] if task.origin else items


def read_tasks(source: CorpusSource, chunk_bytes: int = streams.READ_CHUNK_BYTES, local_files: bool = True,
               line_by_line: bool | str = "auto") -> Iterator[ReadTask]:
    """The corpus as tasks that workers read (:func:`read_task`), in the corpus's order.
    ``local_files=False`` (workers on other machines): this machine's files are read here and
    their texts sent; remote URLs are still read by the workers."""
    if source.parts:
        for part in source.parts:
            yield from read_tasks(part, chunk_bytes, local_files, line_by_line)
    elif source.path is not None:
        yield from _file_tasks(source, chunk_bytes, local_files, line_by_line)
    else:  # texts the client holds: the built-in corpus, a Hugging Face dataset, what a Kedro dataset loaded
        yield from (ReadTask("items", items=tuple(batch), origin=source.name) for batch in source.batches(chunk_bytes))


def _file_tasks(source: CorpusSource, chunk_bytes: int, local_files: bool, line_by_line) -> Iterator[ReadTask]:
    options = source.storage_options
    common = {"storage_options": options, "text_column": source.text_column, "origin": source.name,
              "chunk_bytes": chunk_bytes}
    for file, size in source.listing:
        suffix = format_suffix(str(file))
        if isinstance(file, Path) and not local_files:  # workers elsewhere cannot see this machine's files
            batches = iter_file_batches([file], source.text_column, chunk_bytes, line_by_line=line_by_line)
            yield from (ReadTask("items", items=tuple(batch), origin=source.name) for batch in batches)
        elif suffix == ".parquet":
            with open_parquet(file, options) as parquet:
                groups = parquet.num_row_groups
            yield from (ReadTask("row_group", file, start=group, **common) for group in range(groups))
        elif suffix not in TEXT_SUFFIXES:
            yield ReadTask("file", file, **common)  # a CSV/JSON table: a quoted cell may hold a newline
        elif line_by_line != "auto" and compression_of(str(file)):
            yield ReadTask("file", file, **common, line_by_line=bool(line_by_line))  # no head to read: see below
        else:
            # Byte ranges need a known size, seeking, and the stored bytes to be the text: a compressed
            # or UTF-16 file is read whole by one worker (its memory is that file's, not the corpus's).
            with streams.open_corpus_file(file, options) as handle:
                head = handle.read(streams.HEAD_BYTES)
                stored_is_text = handle.compression is None and handle.bom_encoding is None
            decided = streams.resolve_line_by_line(line_by_line, head, source_name(file))
            if size and stored_is_text and streams.reads_ranges(file, options):
                yield from (ReadTask("range", file, start=start, stop=min(start + chunk_bytes, size), **common,
                                     line_by_line=decided) for start in range(0, size, chunk_bytes))
            else:
                yield ReadTask("file", file, **common, line_by_line=decided)
