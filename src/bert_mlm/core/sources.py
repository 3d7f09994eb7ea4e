"""Corpus sources: files, directories (symlinks followed), globs, CSV/Parquet/JSONL tables and the
built-in corpus, read in bounded chunks of :class:`~bert_mlm.core.corpus.RawText`.

Text files are cut at paragraph boundaries, tables by rows; undecodable bytes and NUL bytes are
replaced or removed and counted; binary files and non-text columns are refused by name.
"""

from __future__ import annotations

import ast
import codecs
import csv
import functools
import glob
import io
import json
import logging
import os
import re
import sysconfig
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

import fsspec
import fsspec.compression
import fsspec.utils
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bert_mlm.core.corpus import (
    _CONTROL,
    BUILTIN_SOURCE,
    SUPPORTED_SUFFIXES,
    TABLE_SUFFIXES,
    TEXT_SUFFIXES,
    CorpusError,
    RawText,
)
from bert_mlm.core.cpus import usable_cpus

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- where files are
# fsspec (the library Kedro's own datasets read through) opens every path: local, s3://, gs://,
# abfs://, http(s)://, hf://. Compression is taken from the last suffix and undone while
# streaming, never to disk.
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
# The package each protocol needs, and the bert_mlm extra that installs it.
PROTOCOL_PACKAGES = {
    "s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
    "abfs": ("adlfs", "azure"), "abfss": ("adlfs", "azure"), "az": ("adlfs", "azure"),
    "http": ("aiohttp", "http"), "https": ("aiohttp", "http"), "hf": ("huggingface_hub", "hf"),
}
LOCAL_PROTOCOLS = ("file", "local")
# A corpus file: a local ``Path``, or a URL (``str``) on a remote file system.
CorpusFile = Path | str


def protocol_of(path: str) -> str:
    return fsspec.utils.get_protocol(path)


def is_remote(path: str | os.PathLike) -> bool:
    return protocol_of(str(path)) not in LOCAL_PROTOCOLS


def without_userinfo(url: str) -> str:
    """A URL fit for messages and manifests: ``https://user:secret@host/x`` -> ``https://***@host/x``."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]+@", r"\1***@", url)


def format_suffix(name: str) -> str:
    """The format of ``name`` under its compression: ``books.jsonl.gz`` -> ``.jsonl``."""
    suffixes = [s.lower() for s in PurePosixPath(name).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def compression_of(name: str) -> str | None:
    return COMPRESSIONS.get(PurePosixPath(name).suffix.lower())


def skip_reason(name: str) -> str | None:
    """Why a listed file is not read (``None``: it is read)."""
    suffix = format_suffix(name)
    if suffix not in SUPPORTED_SUFFIXES:
        return f"{suffix or 'no suffix'} is not a corpus format"
    if suffix == ".parquet" and compression_of(name):
        return "a compressed Parquet file cannot be read in row groups (Parquet compresses itself)"
    return None


def _missing_package(protocol: str, error: ImportError, parameter: str) -> CorpusError:
    package, extra = PROTOCOL_PACKAGES.get(protocol, (getattr(error, "name", None) or "its fsspec backend", None))
    install = f'pip install "bert_mlm[{extra}]"' if extra else f"pip install {package}"
    return CorpusError(f"{parameter}: reading {protocol}:// paths needs {package}; install it with {install}")


def remote_filesystem(url: str, storage_options: dict | None, parameter: str = "corpus.path"):
    """The fsspec file system of ``url`` and the path on it; credentials and options the Kedro way
    (a dataset's ``credentials`` merged with its ``fs_args``)."""
    protocol = protocol_of(url)
    try:
        return fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except ImportError as error:
        raise _missing_package(protocol, error, parameter) from error
    except ValueError as error:
        if "Protocol not known" in str(error):
            raise CorpusError(
                f"{parameter}: {protocol}:// is not a file system fsspec knows ({without_userinfo(url)!r})"
            ) from error
        raise CorpusError(f"{parameter}: {without_userinfo(url)!r}: {error}") from error


def _remote_error(url: str, error: BaseException, parameter: str) -> CorpusError:
    shown = without_userinfo(url)
    if isinstance(error, FileNotFoundError):
        return CorpusError(f"{parameter}: {shown!r} does not exist")
    if isinstance(error, PermissionError):
        return CorpusError(f"{parameter}: access to {shown!r} was refused ({_first_line(error)}); check the "
                           "credentials (corpus.credentials names an entry of conf/local/credentials.yml)")
    return CorpusError(f"{parameter}: {shown!r} could not be listed ({type(error).__name__}: {_first_line(error)}); "
                       "is the host reachable and are the credentials right?")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def list_remote_files(url: str, storage_options: dict | None, parameter: str) -> list[tuple[str, int | None]]:
    """Every file of a remote file, directory (recursively) or glob, as (URL, size)."""
    fs, root = remote_filesystem(url, storage_options, parameter)
    try:
        if any(ch in root for ch in "*?["):
            found = fs.glob(root, detail=True)
            if not found:
                raise CorpusError(f"{parameter}: the glob {without_userinfo(url)!r} matches no file")
        elif fs.isdir(root):
            found = fs.find(root, detail=True)
        else:
            found = {root: fs.info(root)}
    except CorpusError:
        raise
    except Exception as error:  # each backend raises its own types; the user needs one line
        raise _remote_error(url, error, parameter) from error
    return [(fs.unstrip_protocol(name), info.get("size")) for name, info in sorted(found.items())
            if info.get("type", "file") != "directory"]


def list_corpus_files(path: str | os.PathLike, storage_options: dict | None = None,
                      parameter: str = "corpus.path") -> list[tuple[CorpusFile, int | None]]:
    """The corpus files of a file, a directory (recursively) or a glob, local or remote, sorted,
    with their sizes (compressed sizes for compressed files). Files that are not read are named in
    one warning, with why."""
    text = str(path)
    if is_remote(text):
        listed = list_remote_files(text, storage_options, parameter)
    else:
        text = text.removeprefix("file://")
        if any(ch in text for ch in "*?["):
            candidates = [Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True)]
            if not candidates:
                raise CorpusError(f"{parameter}: the glob {text!r} matches no file")
        else:
            candidate = Path(text).expanduser()
            if not candidate.exists():
                raise CorpusError(f"{parameter}: {text!r} does not exist")
            candidates = walk_files(candidate, parameter) if candidate.is_dir() else [candidate]
        listed = [(p, None) for p in sorted(p for p in candidates if p.is_file())]
    files, skipped = [], []
    for file, size in listed:
        why = skip_reason(str(file))
        if why is None:
            files.append((file, size if size is not None or not isinstance(file, Path) else file.stat().st_size))
        elif not PurePosixPath(str(file)).name.startswith("."):  # hidden files (.DS_Store, .gitkeep): silently
            skipped.append((file, why))
    if not files:
        raise CorpusError(
            f"{parameter}: {without_userinfo(text)!r} holds no corpus file; supported are "
            f"{', '.join(SUPPORTED_SUFFIXES)}, each optionally compressed ({', '.join(COMPRESSIONS)})"
        )
    if skipped:
        shown = "; ".join(f"{printable(f) if isinstance(f, Path) else without_userinfo(f)} ({why})"
                          for f, why in skipped[:10])
        more = f"; and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        logger.warning("%s: %d file(s) skipped, not read: %s%s", parameter, len(skipped), shown, more)
    return files


def resolve_corpus_files(path: str | os.PathLike, storage_options: dict | None = None,
                         parameter: str = "corpus.path") -> list[CorpusFile]:
    """Expand a file, a directory (recursively) or a glob into a sorted list of corpus files."""
    return [file for file, _ in list_corpus_files(path, storage_options, parameter)]


def walk_files(root: Path, parameter: str = "corpus.path") -> list[Path]:
    """Every file under ``root``, following symlinked directories (``rglob`` skips them) but
    entering each real directory once, so a link back up the tree cannot loop. Logs each
    directory read, links shown with their targets."""
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    repeated: list[str] = []
    for directory, subdirectories, names in os.walk(root, followlinks=True):
        status = os.stat(directory)
        if (status.st_dev, status.st_ino) in seen:
            real = os.path.realpath(directory)
            if Path(os.path.abspath(directory)).is_relative_to(real):  # a link to one of its own ancestors
                logger.warning("%s: %s leads back to a directory it is inside (a symlink loop); skipped",
                               parameter, printable(directory))
            else:
                repeated.append(printable(directory))
            subdirectories[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        subdirectories.sort()
        here = [Path(directory) / name for name in sorted(names)]
        corpus_files = sum(1 for p in here if skip_reason(p.name) is None)
        link = f" (symlink to {printable(os.path.realpath(directory))})" if Path(directory).is_symlink() else ""
        logger.info("%s: %d corpus file(s) in %s%s", parameter, corpus_files, printable(directory), link)
        files += here
    if repeated:
        logger.warning("%s: %d link(s) lead to a directory already read, whose files are read once: %s%s",
                       parameter, len(repeated), ", ".join(repeated[:5]), " ..." if len(repeated) > 5 else "")
    return files


def printable(path: str | os.PathLike) -> str:
    """A path as text even when its name is not valid UTF-8 (shown with \\x escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def source_name(file: CorpusFile) -> str:
    return printable(file) if isinstance(file, Path) else without_userinfo(str(file))


# Byte-order marks: a file that starts with one is read in that encoding (re-encoded to UTF-8).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def bom_encoding(head: bytes) -> str | None:
    """The encoding a byte-order mark at the start of ``head`` announces, if any."""
    return next((encoding for bom, encoding in _BOMS if head.startswith(bom)), None)


def _decompression_errors() -> tuple[type[BaseException], ...]:
    import lzma
    import zlib
    errors: list[type[BaseException]] = [EOFError, OSError, lzma.LZMAError, zlib.error]
    try:
        import zstandard
        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


class _Wrapper(io.RawIOBase):
    """A readable stream over ``self._inner`` that a subclass's ``read`` defines; closing it closes the inner one."""

    _inner = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            if self._inner is not None:
                self._inner.close()
        finally:
            super().close()


class _Guarded(_Wrapper):
    """A readable stream that counts what it delivers and turns a broken read (a truncated or
    corrupt archive, a dropped connection) into one :class:`CorpusError` naming the file and how far
    it got. With ``encoding`` (a UTF-16/32 file), it delivers the text re-encoded as UTF-8."""

    def __init__(self, stream, source: str, compression: str | None, encoding: str | None = None):
        self._inner = stream
        self._text = (io.TextIOWrapper(io.BufferedReader(stream), encoding=encoding, errors="replace", newline="")
                      if encoding else None)
        self._pending = b""
        self.source, self.compression = source, compression
        self.delivered = 0

    def _fail(self, error: BaseException) -> CorpusError:
        what = f"the {self.compression} stream" if self.compression else "reading"
        return CorpusError(
            f"corpus file {self.source!r} is truncated or corrupt: {what} broke after {self.delivered:,} "
            f"uncompressed bytes ({type(error).__name__}: {_first_line(error)}); nothing was written from it"
        )

    def read(self, size: int = -1) -> bytes:
        try:
            if self._text is None:
                data = self._inner.read(size)
                # Decompressors and network files may return short reads before the end: fill up,
                # so that a short read means the end of the file to the callers.
                while 0 < len(data) < size:
                    more = self._inner.read(size - len(data))
                    if not more:
                        break
                    data += more
            else:
                while size < 0 or len(self._pending) < size:
                    text = self._text.read(65536 if size < 0 else max(1, size // 2))
                    if not text:
                        break
                    self._pending += text.encode("utf-8", "surrogatepass")
                data, self._pending = (self._pending, b"") if size < 0 else (self._pending[:size], self._pending[size:])
        except _decompression_errors() as error:
            raise self._fail(error) from error
        self.delivered += len(data)
        return data



def as_corpus_file(file: CorpusFile | os.PathLike) -> CorpusFile:
    """A local path as a ``Path``, a remote URL as it is."""
    return file if isinstance(file, Path) or is_remote(str(file)) else Path(file)


def open_raw(file: CorpusFile, storage_options: dict | None = None):
    """The file's stored bytes, seekable (no decompression): a local file or an fsspec file."""
    if isinstance(file, Path):
        return open(file, "rb")  # noqa: SIM115 - the caller closes it
    return fsspec.open(str(file), "rb", **dict(storage_options or {})).open()


def open_parquet(file: CorpusFile, storage_options: dict | None = None) -> pq.ParquetFile:
    """A Parquet file, read at random (footer first, then row groups), local or remote."""
    return pq.ParquetFile(file if isinstance(file, Path) else open_raw(file, storage_options))


def parquet_texts(column: pa.Array, source: str) -> list[RawText]:
    """A Parquet text column's non-null values as documents (a binary column decoded as UTF-8)."""
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    is_bytes = pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    return [replace(decode_text(v, source, check_binary=False), is_document=True) if is_bytes
            else RawText(source, v, is_document=True) for v in column.drop_null().to_pylist()]


def open_corpus_file(file: CorpusFile, storage_options: dict | None = None) -> _Guarded:
    """``file`` as a binary stream of UTF-8 text (or a table's bytes): decompressed on the fly,
    a UTF-16/32 file re-encoded, a UTF-8 byte-order mark dropped. Close it after use."""
    name = str(file)
    source = source_name(file)
    compression = compression_of(name)
    try:
        raw = open_raw(file, storage_options)
    except ImportError as error:
        raise _missing_package(protocol_of(name), error, "corpus.path") from error
    except OSError as error:
        raise CorpusError(
            f"corpus file {source!r} could not be opened ({type(error).__name__}: {_first_line(error)})"
        ) from error
    if compression == "zstd":
        stream = _ZstdReader(raw)
    else:
        stream = fsspec.compression.compr[compression](raw, mode="rb") if compression else raw
    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(stream) if isinstance(stream, io.RawIOBase) else stream
    guarded = _Guarded(stream, source, compression)
    head = guarded.read(4)
    encoding = bom_encoding(head)
    if encoding is None:
        return _Rewound(guarded, head)
    # The decoder reads the byte-order mark itself.
    return _Rewound(_Guarded(_Rewound(guarded, head), source, compression, encoding=encoding), b"")


class _ZstdReader(_Wrapper):
    """A Zstandard stream, frame after frame. Written here because ``zstandard``'s stream reader
    (which fsspec uses) ends a truncated file silently, as if it were complete: this one checks
    that the last frame ended."""

    def __init__(self, raw, read_size: int = 1 << 20):
        import zstandard

        self._inner, self._read_size = raw, read_size
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new()
        self._buffer = b""
        self._ended = False

    def read(self, size: int = -1) -> bytes:
        while not self._ended and (size < 0 or len(self._buffer) < size):
            data = self._inner.read(self._read_size)
            if not data:
                self._ended = True
                if self._in_frame:
                    raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                break
            while data:
                self._in_frame = True
                self._buffer += self._frame.decompress(data)
                data = b""
                if self._frame.eof:  # the next frame starts in what this one left
                    data, self._frame, self._in_frame = self._frame.unused_data, self._new(), False
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    _in_frame = False  # a frame has started and not ended



class _Rewound(_Wrapper):
    """``stream`` with ``head`` (already read from it) put back in front."""

    def __init__(self, stream, head: bytes):
        self._inner, self._head = stream, head

    def peek_head(self, size: int = 65536) -> bytes:
        """The first ``size`` bytes, left to be read again."""
        if len(self._head) < size:
            self._head += self._inner.read(size - len(self._head))
        return self._head[:size]

    @property
    def delivered(self) -> int:
        return self._inner.delivered

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size < 0:
                data, self._head = self._head + self._inner.read(), b""
                return data
            data, self._head = self._head[:size], self._head[size:]
            if len(data) < size:
                data += self._inner.read(size - len(data))
            return data
        return self._inner.read(size)



_replaced_bytes = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    # errors="replace" inserts one U+FFFD per undecodable *sequence*; count the bytes instead.
    _replaced_bytes.count += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("bert_mlm_count_replace", _count_and_replace)


def check_not_binary(head: bytes, source: str) -> None:
    """Refuse a file whose first bytes (64 KiB) are more than 10 % control characters (NUL
    included): a binary file. A few NUL bytes in text are not refused, wherever they are."""
    text = head[:65536].decode("utf-8", errors="replace")
    if text and len(_CONTROL.findall(text)) > 0.1 * len(text):
        raise CorpusError(f"corpus file {source!r} looks binary (mostly control characters or NUL bytes)")


def decode_text(data: bytes, source: str, check_binary: bool = True) -> RawText:
    """Decode UTF-8, replacing (and counting) undecodable bytes and removing (and counting) NUL
    bytes, the same in every chunk of a file; refuse binary files (``check_binary``: the first
    64 KiB of ``data``)."""
    if check_binary:
        check_not_binary(data, source)
    removed = data.count(b"\x00")
    if removed:
        data = data.replace(b"\x00", b"")
    _replaced_bytes.count = 0
    text = data.decode("utf-8", errors="bert_mlm_count_replace")
    return RawText(source=source, text=text, replaced_bytes=_replaced_bytes.count + removed)


# A blank line in bytes (CRLF too). Cutting a file right after one gives the same paragraphs as
# reading it whole: the cut falls between two paragraphs, and never inside a UTF-8 sequence.
# Blank: only spaces, tabs, vertical tabs, form feeds, NBSP or U+3000 (all spaces to normalise()).
_NEWLINE = rb"(?:\r\n|\r(?!\n)|\n)"  # a CR is a line end of its own only when no LF follows
_BLANK_LINE_BYTES = re.compile(_NEWLINE + rb"(?:[ \t\x0b\x0c]|\xc2\xa0|\xe3\x80\x80)*" + _NEWLINE)
READ_CHUNK_BYTES = 8 << 20
TABLE_CHUNK_ROWS = 20_000


def _paragraph_cut(block: bytes, hard_limit: int) -> int:
    """Where to cut ``block``: after its last blank line; 0 (read on) when it has none and is
    under ``hard_limit``; else at the last space or newline, or the last UTF-8 character start.

    Only a single paragraph longer than ``hard_limit`` is cut inside; it would be cut into
    ``corpus.max_document_chars`` pieces anyway, so only where one piece ends moves.
    """
    tail_start = max(0, len(block) - (1 << 20))
    for start in (tail_start, 0) if tail_start else (0,):
        ends = [match.end() for match in _BLANK_LINE_BYTES.finditer(block, start)]
        if ends:
            return ends[-1]
    if len(block) < hard_limit:
        return 0
    cut = max(block.rfind(b" "), block.rfind(b"\n"))
    if cut > 0:
        return cut + 1
    cut = len(block) - 1
    while cut > 0 and (block[cut] & 0xC0) == 0x80:  # back off to the start of the last character
        cut -= 1
    return cut if cut > 0 else len(block)


def iter_text_file(file: CorpusFile, chunk_bytes: int = READ_CHUNK_BYTES,
                   storage_options: dict | None = None) -> Iterator[RawText]:
    """A text file in chunks of about ``chunk_bytes``, each ending at a paragraph boundary."""
    file = as_corpus_file(file)
    source = source_name(file)
    first = True
    carry = b""
    with open_corpus_file(file, storage_options) as handle:
        check_not_binary(handle.peek_head(), source)  # the file's head, whatever the first chunk holds
        while True:
            data = handle.read(chunk_bytes)
            block = carry + data if carry else data
            if len(data) < chunk_bytes:  # the end of the file
                if block:
                    yield replace(decode_text(block, source, check_binary=False), starts_source=first)
                return
            cut = _paragraph_cut(block, hard_limit=4 * chunk_bytes)
            if cut == 0:
                carry = block
                continue
            yield replace(decode_text(block[:cut], source, check_binary=False), starts_source=first)
            first = False
            carry = block[cut:]


def iter_table_rows(file: CorpusFile, text_column: str, chunk_rows: int = TABLE_CHUNK_ROWS,
                    storage_options: dict | None = None) -> Iterator[list[RawText]]:
    """The ``text_column`` of a ``.csv``/``.tsv``/``.parquet``/``.jsonl`` table (compressed or
    not), ``chunk_rows`` rows at a time; every non-null value is one document. A column that holds
    something else than text (numbers, lists, objects) is refused, naming the file; bytes are
    decoded as UTF-8."""
    table = _TableReader(as_corpus_file(file), text_column, chunk_rows, storage_options)
    suffix = format_suffix(str(table.file))
    read = {".parquet": table.parquet, ".csv": table.delimited, ".tsv": table.delimited}.get(suffix, table.json_lines)
    try:
        yield from read()
    except CorpusError:
        raise
    except Exception as error:  # pandas and pyarrow raise many types; the user needs the file name
        where = first_bad_json_line(table.file, storage_options) if suffix in (".jsonl", ".json") else None
        if where is not None:
            raise CorpusError(f"corpus file {table.source!r}, line {where[0]}: {where[1]}") from error
        raise CorpusError(f"corpus file {table.source!r} could not be read as {suffix} after {table.rows:,} row(s): "
                          f"{_first_line(error)}") from error


@dataclass
class _TableReader:
    """One table's text column, read ``chunk_rows`` rows at a time by the reader of its format;
    ``rows`` counts the rows read so far (the message of a file that breaks half-way says it)."""

    file: CorpusFile
    text_column: str
    chunk_rows: int
    storage_options: dict | None
    rows: int = 0

    @functools.cached_property
    def source(self) -> str:
        return source_name(self.file)

    def missing(self, columns) -> CorpusError:
        return CorpusError(
            f"corpus.text_column: column {self.text_column!r} does not exist in {self.source!r}; "
            f"its columns are {list(map(str, columns))}"
        )

    def not_text(self, kind: str) -> CorpusError:
        return CorpusError(f"corpus.text_column: column {self.text_column!r} of {self.source!r} holds {kind}, not text")

    def _documents(self, values: list) -> list[RawText]:
        return [RawText(self.source, value, is_document=True) for value in values]

    def parquet(self) -> Iterator[list[RawText]]:
        parquet = open_parquet(self.file, self.storage_options)
        if self.text_column not in parquet.schema_arrow.names:
            raise self.missing(parquet.schema_arrow.names)
        kind = parquet.schema_arrow.field(self.text_column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        is_bytes = pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or is_bytes):
            raise self.not_text(f"{kind} values")
        for batch in parquet.iter_batches(batch_size=self.chunk_rows, columns=[self.text_column]):
            self.rows += batch.num_rows
            yield parquet_texts(batch.column(0), self.source)

    def delimited(self) -> Iterator[list[RawText]]:
        # TSV as written by most tools (GLUE, spreadsheets): tab-separated, no quoting.
        tsv = format_suffix(str(self.file)) == ".tsv"
        options = {"sep": "\t", "quoting": csv.QUOTE_NONE} if tsv else {}
        with open_corpus_file(self.file, self.storage_options) as handle:
            columns = list(pd.read_csv(handle, nrows=0, encoding_errors="replace", **options).columns)
        if self.text_column not in columns:
            raise self.missing(columns)
        with open_corpus_file(self.file, self.storage_options) as handle:
            for frame in pd.read_csv(handle, dtype=str, keep_default_na=False, encoding_errors="replace",
                                     usecols=[self.text_column], chunksize=self.chunk_rows, **options):
                values = frame[self.text_column].tolist()
                self.rows += len(values)
                yield self._documents(values)

    def json_lines(self) -> Iterator[list[RawText]]:
        seen: set[str] = set()
        found = False
        with open_corpus_file(self.file, self.storage_options) as handle:
            text = io.TextIOWrapper(io.BufferedReader(handle), encoding="utf-8", errors="replace")
            for frame in pd.read_json(text, lines=True, dtype=False, chunksize=self.chunk_rows):
                seen.update(map(str, frame.columns))
                self.rows += len(frame)
                if self.text_column not in frame.columns:  # rows need not share keys
                    continue
                found = True
                values = frame[self.text_column].dropna().tolist()
                wrong = next((v for v in values if not isinstance(v, str)), None)
                if wrong is not None:
                    raise self.not_text(f"non-text values such as {wrong!r}")
                yield self._documents(values)
        if not found:
            raise self.missing(sorted(seen))


def first_bad_json_line(file: CorpusFile, storage_options: dict | None = None) -> tuple[int, str] | None:
    """The first line of a JSON Lines file that is not a JSON object, and what is wrong with it
    (pandas says only "Expected object or value")."""
    try:
        with open_corpus_file(file, storage_options) as raw:
            handle = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace")
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as error:
                    return number, f"not valid JSON ({error.msg} at column {error.colno})"
                if not isinstance(value, dict):
                    return number, f"a JSON {type(value).__name__}, not an object with a text field"
    except CorpusError as error:  # a truncated archive: say that, not a JSON error
        return 0, str(error)
    return None


def iter_raw_batches(
    path: str | os.PathLike | None,
    text_column: str = "text",
    chunk_bytes: int = READ_CHUNK_BYTES,
    builtin_max_files: int | None = None,
    storage_options: dict | None = None,
    parameter: str = "corpus.path",
) -> Iterator[list[RawText]]:
    """The raw corpus in batches of about ``chunk_bytes`` of text, in a fixed order.

    ``path``: a file, a directory (recursive) or a glob, local or remote; ``None`` is the built-in corpus.
    """
    if path is None:
        yield from _batched(builtin_corpus(builtin_max_files), chunk_bytes)
        return
    yield from iter_file_batches(resolve_corpus_files(path, storage_options, parameter), text_column, chunk_bytes,
                                 storage_options)


def iter_file_batches(files: list[CorpusFile], text_column: str, chunk_bytes: int,
                      storage_options: dict | None = None) -> Iterator[list[RawText]]:
    """Listed corpus files in batches of about ``chunk_bytes`` of text, in their order."""
    for file in files:
        if format_suffix(str(file)) in TABLE_SUFFIXES:
            rows = iter_table_rows(file, text_column, storage_options=storage_options)
            yield from _batched((row for batch in rows for row in batch), chunk_bytes)
        else:
            for chunk in iter_text_file(file, chunk_bytes, storage_options):
                yield [chunk]


# ----------------------------------------------------------------------------- reading on workers
@dataclass(frozen=True)
class ReadTask:
    """A bounded piece of a corpus that a Dask worker reads itself, from wherever the file is (so the
    client lists files but never funnels their bytes): a byte range of an uncompressed text file,
    a row group of a Parquet file, a whole other file, or texts the client already holds (the
    built-in corpus, a Hugging Face dataset, what a Kedro dataset loaded)."""

    kind: str  # "range" | "row_group" | "file" | "items"
    file: CorpusFile | None = None
    storage_options: dict | None = None
    text_column: str = "text"
    origin: str = ""
    start: int = 0
    stop: int = 0
    chunk_bytes: int = READ_CHUNK_BYTES
    items: tuple[RawText, ...] = ()


def _boundary(handle, offset: int, size: int, chunk_bytes: int) -> int:
    """The first paragraph boundary at or after ``offset``: the end of the first blank line found
    from there (else, past ``4 * chunk_bytes``, the first space or newline). A function of the
    file's bytes from ``offset`` only, so the two tasks that share a range end agree on it."""
    if offset <= 0 or offset >= size:
        return max(0, min(offset, size))
    handle.seek(offset)
    window = b""
    while len(window) < 4 * chunk_bytes:
        block = handle.read(1 << 16)
        if not block:
            return size
        window += block
        # A blank line that may continue past the window's end is not taken until the window covers it.
        match = _BLANK_LINE_BYTES.search(window, 0, max(0, len(window) - 64))
        if match:
            return offset + match.end()
    space = re.search(rb"[ \n]", window)
    return offset + (space.end() if space else len(window))


def read_task(task: ReadTask) -> list[RawText]:
    """Run one :class:`ReadTask`: the raw texts of its piece (on a worker)."""
    if task.kind == "items":
        return list(task.items)
    file = task.file
    if task.kind == "row_group":
        parquet = open_parquet(file, task.storage_options)
        column = parquet.read_row_group(task.start, columns=[task.text_column]).column(0)
        items = parquet_texts(column.combine_chunks(), source_name(file))
    elif task.kind == "range":
        source = source_name(file)
        with open_raw(file, task.storage_options) as handle:
            size = handle.seek(0, os.SEEK_END)
            if task.start == 0:
                handle.seek(0)
                check_not_binary(handle.read(65536), source)
            begin = _boundary(handle, task.start, size, task.chunk_bytes)
            end = _boundary(handle, task.stop, size, task.chunk_bytes)
            handle.seek(begin)
            data = handle.read(max(0, end - begin))
        items = [replace(decode_text(data, source, check_binary=False), starts_source=task.start == 0)] if data else []
    elif format_suffix(str(file)) in TABLE_SUFFIXES:
        items = [row for rows in iter_table_rows(file, task.text_column, storage_options=task.storage_options)
                 for row in rows]
    else:
        items = list(iter_text_file(file, task.chunk_bytes, task.storage_options))
    return [replace(item, origin=task.origin) for item in items] if task.origin else items


def _reads_ranges(file: CorpusFile, source: CorpusSource) -> bool:
    """Whether a file can be read from an offset (object stores can; some HTTP servers cannot)."""
    if isinstance(file, Path) or protocol_of(str(file)) not in ("http", "https"):
        return True
    import urllib.request

    request = urllib.request.Request(str(file), headers={"Range": "bytes=1-1"})
    try:  # a server that honours ranges answers 206; one that does not sends the whole file (not read here)
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the user's own corpus URL
            return response.status == 206
    except OSError:  # a server this cannot reach unaided (fsspec's credentials): one worker reads it whole
        return False


def _has_bom(file: CorpusFile, source: CorpusSource) -> bool:
    """Whether an uncompressed file starts with a byte-order mark (it is re-encoded: read whole)."""
    with open_raw(file, source.storage_options) as handle:
        return bom_encoding(handle.read(4)) is not None


def _file_tasks(source: CorpusSource, chunk_bytes: int, local_files: bool) -> Iterator[ReadTask]:
    common = {"storage_options": source.storage_options, "text_column": source.text_column, "origin": source.name,
              "chunk_bytes": chunk_bytes}
    for file, size in source.listing:
        suffix = format_suffix(str(file))
        if isinstance(file, Path) and not local_files:  # workers elsewhere cannot see this machine's files
            one = CorpusSource(str(file), source.text_column, builtin_when_empty=False)
            yield from (ReadTask("items", items=tuple(batch), origin=source.name) for batch in one.batches(chunk_bytes))
        elif suffix == ".parquet":
            with open_parquet(file, source.storage_options) as parquet:
                groups = parquet.num_row_groups
            yield from (ReadTask("row_group", file, start=group, **common) for group in range(groups))
        elif (suffix in TEXT_SUFFIXES and not compression_of(str(file)) and size and _reads_ranges(file, source)
              and not _has_bom(file, source)):
            # Byte ranges need a known size and seeking; a compressed file or a CSV/JSON table (a quoted
            # cell may hold a newline) is read whole by one worker: its memory is that file's, not the corpus's.
            yield from (ReadTask("range", file, start=start, stop=min(start + chunk_bytes, size), **common)
                        for start in range(0, size, chunk_bytes))
        else:
            yield ReadTask("file", file, **common)


def read_tasks(
    source: CorpusSource, chunk_bytes: int = READ_CHUNK_BYTES, local_files: bool = True
) -> Iterator[ReadTask]:
    """The corpus as tasks that workers read (:func:`read_task`), in the corpus's order.
    ``local_files=False`` (workers on other machines): this machine's files are read here and
    their texts sent; remote URLs are still read by the workers."""
    if source.parts:
        for part in source.parts:
            yield from read_tasks(part, chunk_bytes, local_files)
    elif source.path is not None:
        yield from _file_tasks(source, chunk_bytes, local_files)
    else:
        for batch in source.batches(chunk_bytes):
            yield ReadTask("items", items=tuple(batch), origin=source.name)


HF_DATASET_KEYS = ("name", "config", "split", "text_column", "path", "revision", "streaming")


@dataclass(frozen=True)
class HFDataset:
    """A Hugging Face dataset as a corpus: from the Hub (``name``, ``config``, ``split``; read in
    streaming mode, so memory stays flat) or a ``save_to_disk`` directory (``path``; memory-mapped)."""

    name: str | None = None
    config: str | None = None
    split: str = "train"
    text_column: str = "text"
    path: str | None = None
    revision: str | None = None
    streaming: bool = True

    @classmethod
    def from_mapping(cls, value, parameter: str = "corpus.hf_dataset") -> HFDataset:
        if isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, dict):
            raise CorpusError(f"{parameter}: {value!r} must be a mapping with name (a Hub id) or path (save_to_disk)")
        unknown = sorted(set(value) - set(HF_DATASET_KEYS))
        if unknown:
            raise CorpusError(f"{parameter}: unknown key(s) {unknown}; use {list(HF_DATASET_KEYS)}")
        spec = cls(**{k: v for k, v in value.items() if v is not None})
        if (spec.name is None) == (spec.path is None):
            raise CorpusError(
                f"{parameter}: give exactly one of name (a Hub dataset id) or path (a save_to_disk directory)"
            )
        return spec

    def describe(self) -> str:
        if self.path is not None:
            return f"hf-disk:{self.path}"
        return f"hf:{self.name}" + (f"/{self.config}" if self.config else "") + f"[{self.split}]"

    def open(self, parameter: str = "corpus.hf_dataset"):
        """The dataset's split, checked (exists, has ``text_column``) without reading its rows."""
        try:
            import datasets
        except ImportError as error:
            raise CorpusError(f'{parameter}: reading Hugging Face datasets needs the datasets package; '
                              f'install it with pip install "bert_mlm[hf]"') from error
        try:
            if self.path is not None:
                if not Path(self.path).expanduser().is_dir():
                    raise CorpusError(
                        f"{parameter}.path: {self.path!r} is not a directory (one written by save_to_disk)"
                    )
                dataset = datasets.load_from_disk(str(Path(self.path).expanduser()))
                if isinstance(dataset, datasets.DatasetDict):
                    if self.split not in dataset:
                        raise CorpusError(f"{parameter}.split: {self.split!r} is not a split of {self.path!r}; "
                                          f"it has {sorted(dataset)}")
                    dataset = dataset[self.split]
            else:
                dataset = datasets.load_dataset(self.name, self.config, split=self.split, revision=self.revision,
                                                streaming=self.streaming)
        except CorpusError:
            raise
        except Exception as error:  # offline, unknown id, bad config: one line, as model.init_from does
            offline = (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")
                       or isinstance(error, ConnectionError) or "connect" in str(error).lower())
            hint = (" (offline, and not in the local cache: download it where the Hub is reachable, or "
                    "save_to_disk it there and give corpus.hf_dataset.path)") if self.name and offline else ""
            raise CorpusError(f"{parameter}: {self.describe()} could not be loaded{hint}: "
                              f"{type(error).__name__}: {_first_line(error)}") from error
        columns = dataset.column_names  # None for some streamed datasets: checked when read
        if columns is not None and self.text_column not in columns:
            raise CorpusError(f"{parameter}.text_column: column {self.text_column!r} does not exist in "
                              f"{self.describe()}; its columns are {columns}")
        return dataset

    def batches(self, chunk_bytes: int = READ_CHUNK_BYTES, rows: int = 1000) -> Iterator[list[RawText]]:
        dataset = self.open()
        source = self.describe()
        items = (RawText(source, text, is_document=True)
                 for batch in dataset.iter(batch_size=rows) for text in batch[self.text_column] if text is not None)
        yield from _batched(items, chunk_bytes)


def iter_loaded_data(data, text_column: str, source: str = "catalog") -> Iterator[RawText]:
    """Texts of what a Kedro dataset loaded: a DataFrame (its ``text_column``, a row a document),
    a ``PartitionedDataset``'s partitions (loaded one at a time, in key order), a string (a text,
    split into paragraphs), bytes, or a list of any of these."""
    if isinstance(data, pd.DataFrame):
        if text_column not in data.columns:
            raise CorpusError(f"corpus.text_column: column {text_column!r} does not exist in the catalog's "
                              f"raw_corpus ({source}); its columns are {list(map(str, data.columns))}")
        for value in data[text_column].dropna():
            if not isinstance(value, str):
                raise CorpusError(f"corpus.text_column: column {text_column!r} of {source} holds "
                                  f"non-text values such as {value!r}")
            yield RawText(source, value, is_document=True)
    elif isinstance(data, dict):
        for key in sorted(data):
            value = data[key]
            yield from iter_loaded_data(value() if callable(value) else value, text_column, f"{source}/{key}")
    elif isinstance(data, str):
        yield RawText(source, data)
    elif isinstance(data, bytes):
        yield decode_text(data, source)
    elif isinstance(data, (list, tuple)) or hasattr(data, "__iter__"):
        for index, value in enumerate(data):
            yield from iter_loaded_data(value, text_column, source if isinstance(value, str) else f"{source}[{index}]")
    else:
        raise CorpusError(f"raw_corpus: the catalog loaded a {type(data).__name__}; a corpus is a DataFrame, "
                          "partitions, text or a list of texts")


SOURCE_KEYS = ("path", "text_column", "credentials", "fs_args", "hf_dataset", "weight", "repeat")


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus is (not its text): a file, directory or glob (local or on any fsspec file
    system, compressed or not), a Hugging Face dataset, what a Kedro dataset loaded, the built-in
    corpus, or a mixture of named sources (``parts``) with weights.

    Loading it reads nothing but listings; :meth:`batches` streams the raw texts.
    """

    path: str | None = None
    text_column: str = "text"
    builtin_when_empty: bool = True
    builtin_max_files: int | None = None
    storage_options: dict | None = None
    hf_dataset: HFDataset | None = None
    data: object = None  # what a Kedro dataset loaded (``iter_loaded_data``)
    parts: tuple[CorpusSource, ...] = ()
    name: str = ""  # the source's name in a mixture
    weight: float | None = None
    repeat: float | None = None
    parameter: str = "corpus.path"  # named in messages (the extra evaluation corpus has its own)

    @property
    def is_empty(self) -> bool:
        return (self.path is None and self.hf_dataset is None and self.data is None and not self.parts
                and not self.builtin_when_empty)

    @property
    def is_builtin(self) -> bool:
        return self.path is None and self.hf_dataset is None and self.data is None and not self.parts

    def describe(self) -> str:
        if self.parts:
            return " + ".join(f"{p.name}={p.describe()}" for p in self.parts)
        if self.hf_dataset is not None:
            return self.hf_dataset.describe()
        if self.data is not None:
            return "catalog:raw_corpus"
        if self.path is not None:
            return without_userinfo(self.path)
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
        missing credentials or packages, an unknown dataset or column."""
        for part in self.parts:
            part.check()
        if self.path is not None:
            self.files()
        if self.hf_dataset is not None:
            self.hf_dataset.open()

    def total_bytes(self) -> int | None:
        """The text's size for progress, when the listing knows it (uncompressed files only)."""
        if self.parts:
            sizes = [p.total_bytes() for p in self.parts]
            return None if None in sizes else sum(sizes)
        if self.path is None:
            return None
        if any(size is None or compression_of(str(file)) for file, size in self.listing):
            return None
        return sum(size for _, size in self.listing)

    def batches(self, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[list[RawText]]:
        if self.parts:
            return (
                [replace(item, origin=part.name) for item in batch]
                for part in self.parts for batch in part.batches(chunk_bytes)
            )
        if self.is_empty:
            return iter(())
        if self.hf_dataset is not None:
            return self.hf_dataset.batches(chunk_bytes)
        if self.data is not None:
            return _batched(iter_loaded_data(self.data, self.text_column), chunk_bytes)
        if self.path is None:
            return iter_raw_batches(None, self.text_column, chunk_bytes, self.builtin_max_files)
        return iter_file_batches(self.files(), self.text_column, chunk_bytes, self.storage_options)

    def mixture(self) -> dict[str, dict] | None:
        """Each source's name, weight and repeat, for the shard writer (``None``: not a mixture)."""
        if not self.parts:
            return None
        return {p.name: {"weight": p.weight, "repeat": p.repeat} for p in self.parts}


def storage_options_of(credentials, fs_args, parameter: str) -> dict | None:
    """Kedro's convention: a dataset's resolved ``credentials`` merged with its ``fs_args``."""
    if isinstance(credentials, str):
        raise CorpusError(f"{parameter}: credentials {credentials!r} were not resolved: Kedro resolves credentials "
                          "names in mappings only (give corpus.sources as a mapping of name -> source)")
    for value, key in ((credentials, "credentials"), (fs_args, "fs_args")):
        if value is not None and not isinstance(value, dict):
            raise CorpusError(f"{parameter}.{key}: must be a mapping, not {type(value).__name__}")
    options = {**(credentials or {}), **(fs_args or {})}
    return options or None


def mixture_source(sources, text_column: str = "text", parameter: str = "corpus.sources") -> CorpusSource:
    """``corpus.sources``: a mapping name -> source (``path`` or ``hf_dataset``, optional
    ``text_column``, ``credentials``, ``fs_args``, and ``weight`` (share of training tokens) or
    ``repeat`` (passes over that source)). Every source has a weight, or none has."""
    if isinstance(sources, list):
        sources = {f"source{i + 1}": value for i, value in enumerate(sources)}
    if not isinstance(sources, dict) or not sources:
        raise CorpusError(f"{parameter}: must be a non-empty mapping of name -> source")
    parts = []
    for name, spec in sources.items():
        where = f"{parameter}.{name}"
        if not isinstance(spec, dict):
            raise CorpusError(f"{where}: must be a mapping with path or hf_dataset")
        unknown = sorted(set(spec) - set(SOURCE_KEYS))
        if unknown:
            raise CorpusError(f"{where}: unknown key(s) {unknown}; use {list(SOURCE_KEYS)}")
        if ("path" in spec) == ("hf_dataset" in spec):
            raise CorpusError(f"{where}: give exactly one of path or hf_dataset")
        weight, repeat = spec.get("weight"), spec.get("repeat")
        for key, value in (("weight", weight), ("repeat", repeat)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise CorpusError(f"{where}.{key}: {value!r} must be a positive number")
        if weight is not None and repeat is not None:
            raise CorpusError(f"{where}: give weight or repeat, not both")
        parts.append(
            CorpusSource(
                parameter=f"{where}.path",
                path=None if spec.get("path") is None else str(spec["path"]),
                text_column=spec.get("text_column", text_column),
                builtin_when_empty=False,
                storage_options=storage_options_of(spec.get("credentials"), spec.get("fs_args"), where),
                hf_dataset=HFDataset.from_mapping(spec["hf_dataset"], f"{where}.hf_dataset")
                if "hf_dataset" in spec
                else None,
                name=str(name),
                weight=None if weight is None else float(weight),
                repeat=None if repeat is None else float(repeat),
            )
        )
    weighted = [p.weight is not None for p in parts]
    if any(weighted) and not all(weighted):
        raise CorpusError(
            f"{parameter}: give every source a weight, or none (then each is read repeat times, default 1)"
        )
    return CorpusSource(parts=tuple(parts), text_column=text_column, builtin_when_empty=False)


def as_corpus_source(raw_corpus, text_column: str = "text") -> CorpusSource:
    """The ingestion's input as a source: the project's own corpus dataset, or whatever another
    Kedro dataset declared as ``raw_corpus`` in the catalog loaded (a DataFrame, partitions...)."""
    if isinstance(raw_corpus, CorpusSource):
        return raw_corpus
    return CorpusSource(data=raw_corpus, text_column=text_column, builtin_when_empty=False)


def _batched(items: Iterable[RawText], chunk_bytes: int) -> Iterator[list[RawText]]:
    batch: list[RawText] = []
    size = 0
    for item in items:
        batch.append(item)
        size += len(item.text)
        if size >= chunk_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def read_corpus(path: str | os.PathLike, text_column: str = "text") -> list[RawText]:
    """Every corpus file under ``path`` (file, directory or glob), in memory: for small corpora."""
    return [item for batch in iter_raw_batches(path, text_column) for item in batch]


# ----------------------------------------------------------------------------- built-in corpus
_STDLIB_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__phello__"}


def _docstrings_of_file(path: str) -> list[str]:
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:  # depth-first, source order: deterministic
        node = stack.pop()
        doc = ast.get_docstring(node, clean=True)
        if doc:
            found.append(doc)
        children = [
            child
            for child in getattr(node, "body", [])
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        stack.extend(reversed(children))
    return found


def stdlib_source_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [
        p
        for p in sorted(root.rglob("*.py"))
        if not _STDLIB_SKIP_PARTS.intersection(p.relative_to(root).parts)
    ]


def builtin_corpus(max_files: int | None = None, workers: int | None = None) -> list[RawText]:
    """The documentation strings of the Python standard library (about 1.7 MB on 3.11).

    Parsed with ``ast`` rather than imported, so nothing runs and the result depends only on
    the Python version. Parsing is the slow part (about 10 s on one core), so it fans out over
    processes; the order of the result does not depend on the number of workers.
    """
    files = stdlib_source_files()[:max_files]
    workers = workers or min(len(files), usable_cpus())
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            per_file = list(pool.map(_docstrings_of_file, map(str, files), chunksize=8))
    else:
        per_file = [_docstrings_of_file(str(f)) for f in files]
    root = Path(sysconfig.get_paths()["stdlib"])
    return [
        RawText(source=f"{BUILTIN_SOURCE}/{file.relative_to(root)}", text=doc)
        for file, docs in zip(files, per_file, strict=True)
        for doc in docs
    ]
