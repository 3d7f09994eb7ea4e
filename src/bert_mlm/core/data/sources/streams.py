"""A corpus file as a stream of UTF-8 text on any fsspec file system: decompressed on the fly by fsspec's
compression registry (zstd through ``backports.zstd``, which, unlike ``zstandard``'s reader, fails on
a truncated file), UTF-16/32 re-encoded; text files read in chunks that end where a paragraph ends
(``corpus.line_by_line``), undecodable bytes replaced and counted, binary refused."""

from __future__ import annotations

import codecs
import io
import itertools
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import fsspec.compression
from fsspec.utils import get_protocol

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.common.text import cjk_characters
from bert_mlm.core.data.corpus import _CONTROL, CorpusError, RawText
from bert_mlm.core.data.sources.listing import CorpusFile, compression_of, remote_filesystem, source_name
from bert_mlm.errors import first_line

logger = logging.getLogger(__name__)

READ_CHUNK_BYTES = 8 << 20
HEAD_BYTES = 65536  # what the binary check and the line_by_line=auto decision look at
# Compressed data by its first bytes: a gzip file named .txt is read, not called binary.
COMPRESSED_MAGIC = {"gzip": rb"\x1f\x8b\x08", "bz2": rb"BZh[1-9]1AY&SY", "xz": rb"\xfd7zXZ\x00",
                    "zstd": rb"\x28\xb5\x2f\xfd"}
# Other formats a corpus file turns out to be, named instead of "binary".
FORMAT_MAGIC = {b"PK\x03\x04": "a zip archive", b"7z\xbc\xaf\x27\x1c": "a 7z archive", b"%PDF": "a PDF document",
                b"PAR1": "a Parquet file", b"SQLite format 3\x00": "an SQLite database", b"\x89PNG": "a PNG image",
                b"GIF8": "a GIF image", b"\xff\xd8\xff": "a JPEG image"}
# Byte-order marks: a file that starts with one is read in that encoding (re-encoded to UTF-8).
BOMS = {codecs.BOM_UTF32_LE: "utf-32", codecs.BOM_UTF32_BE: "utf-32", codecs.BOM_UTF8: "utf-8-sig",
        codecs.BOM_UTF16_LE: "utf-16", codecs.BOM_UTF16_BE: "utf-16"}  # in this order: UTF-32 LE starts as UTF-16 LE


def compression_in(head: bytes) -> str | None:
    return next((name for name, magic in COMPRESSED_MAGIC.items() if re.match(magic, head)), None)


def format_in(head: bytes) -> str | None:
    """What a file that is not text is, by its first bytes: compressed data, an archive, an image..."""
    if head[257:262] == b"ustar":
        return "a tar archive"
    if compression := compression_in(head):
        return f"{compression}-compressed data"
    return next((name for magic, name in FORMAT_MAGIC.items() if head.startswith(magic)), None)


def open_raw(file: CorpusFile, storage_options: dict | None = None, **options):
    """The file's stored bytes (no decompression), seekable unless ``options`` ask for a stream."""
    if isinstance(file, Path):
        return open(file, "rb")  # noqa: SIM115 - the caller closes it
    fs, path = remote_filesystem(str(file), storage_options)
    return fs.open(path, "rb", **options)


def open_corpus_file(file: CorpusFile, storage_options: dict | None = None) -> CorpusStream:
    """``file`` as a binary stream of UTF-8 text (or a table's bytes): decompressed on the fly,
    a UTF-16/32 file re-encoded, a UTF-8 byte-order mark dropped. Close it after use."""
    source, http = source_name(file), get_protocol(str(file)) in ("http", "https")
    try:  # HTTP in one streamed GET: fsspec's random-access file asks for ranges, which some servers refuse
        stored = open_raw(file, storage_options, **({"block_size": 0} if http else {}))
    except OSError as error:
        raise CorpusError(f"corpus file {source!r} could not be opened ({type(error).__name__}: "
                          f"{redact_text(first_line(error))})") from error
    return CorpusStream(stored, source, compression_of(str(file)))


class CorpusStream(io.RawIOBase):
    """The one adapter over the library's streams: it picks the decompressor (the suffix's, or the
    one the first bytes announce), counts what it delivers, turns a broken read (a truncated or
    corrupt archive, a dropped connection) into one :class:`CorpusError` naming the file and how far
    it got, and re-encodes a file whose byte-order mark announces UTF-16/32."""

    def __init__(self, stored, source: str, compression: str | None):
        self._stored = stored  # the file's bytes as stored; its position says how far reading got
        self._raw = stored if hasattr(stored, "peek") else io.BufferedReader(stored, 1 << 16)
        self._stream = None  # the decompressed stream, opened by the first read (inside its error handling)
        self.source, self.compression, self.delivered = source, compression, 0
        self.bom_encoding = None  # a UTF-16/32 file's (its byte-order mark's), set by _open
        self._decoder: codecs.IncrementalDecoder | None = None
        self._text = b""  # a UTF-16/32 file's text decoded ahead, as UTF-8

    def _open(self):
        if self.compression is None:
            self.compression = compression_in(self._raw.peek(16))
            if self.compression:
                logger.info("corpus file %r holds %s-compressed data (its first bytes say so): read decompressed",
                            self.source, self.compression)
        compressed = fsspec.compression.compr[self.compression] if self.compression else None
        stream = compressed(self._raw, mode="rb") if compressed else self._raw
        head = stream.peek(4)  # every registered decompressor peeks
        self.bom_encoding = next((encoding for bom, encoding in BOMS.items() if head.startswith(bom)), None)
        self._decoder = codecs.getincrementaldecoder(self.bom_encoding)("replace") if self.bom_encoding else None
        return stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        try:
            self._stream = self._stream or self._open()
            data = self._stream.read(size)
            while self._decoder is not None:  # re-encoded text, ``size`` bytes of it (readinto needs no more)
                self._text += self._decoder.decode(data, final=not data).encode("utf-8", "surrogatepass")
                if not data or 0 <= size <= len(self._text):
                    data, self._text = (self._text, b"") if size < 0 else (self._text[:size], self._text[size:])
                    break
                data = self._stream.read(size)
        except CorpusError:
            raise
        except Exception as error:  # zlib, lzma, zstd, aiohttp, botocore: each its own types; one line here
            how = (f"is truncated or corrupt: the {self.compression} stream broke after {self.delivered:,} "
                   f"uncompressed bytes{self._stored_read()}" if self.compression else
                   f"could not be read to its end: reading broke after {self.delivered:,} bytes")
            raise CorpusError(f"corpus file {self.source!r} {how} ({type(error).__name__}: "
                              f"{redact_text(first_line(error))}); nothing was written from it") from error
        self.delivered += len(data)
        return data

    def _stored_read(self) -> str:
        try:
            return f" ({self._stored.tell():,} bytes of the file read)"
        except Exception:  # noqa: BLE001 - a stream that cannot say: the uncompressed count is enough
            return ""

    def close(self) -> None:
        try:
            for stream in (self._stream, self._raw, self._stored):
                if stream is not None:
                    stream.close()
        finally:
            super().close()


def reads_ranges(file: CorpusFile, storage_options: dict | None) -> bool:
    """Whether a file can be read from an offset (object stores can; some HTTP servers cannot),
    probed through the file system and credentials that read it: a one-byte read at offset 1,
    which fsspec refuses when the server answers with the whole file."""
    if isinstance(file, Path) or get_protocol(str(file)) not in ("http", "https"):
        return True
    try:
        with open_raw(file, storage_options, block_size=1 << 16, cache_type="none") as handle:
            handle.seek(1)
            return len(handle.read(1)) == 1
    except Exception:  # noqa: BLE001 - a refused range or a streaming-only server: one worker reads it whole
        return False


# ----------------------------------------------------------------------------- decoding
_replaced_bytes = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    # errors="replace" inserts one U+FFFD per undecodable *sequence*; count the bytes instead.
    # (Counting afterwards, from a re-encoding, measured 2x slower on a chunk with an error.)
    _replaced_bytes.count += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("bert_mlm_count_replace", _count_and_replace)


def check_not_binary(head: bytes, source: str) -> None:
    """Refuse a file whose first bytes are a known non-text format, or more than 10 % control
    characters (NUL included): a binary file. A few NUL bytes in text are not refused."""
    what = format_in(head)
    if what is not None:
        raise CorpusError(f"corpus file {source!r} is {what}, not text")
    text = head[:HEAD_BYTES].decode("utf-8", errors="replace")
    if text and len(_CONTROL.findall(text)) > 0.1 * len(text):
        raise CorpusError(f"corpus file {source!r} looks binary (mostly control characters or NUL bytes)")


def decode_text(data: bytes, source: str, check_binary: bool = True, **fields) -> RawText:
    """Decode UTF-8, replacing (and counting) undecodable bytes and removing (and counting) NUL
    bytes, the same in every chunk of a file; refuse binary files (``check_binary``: by the head).
    ``fields``: the other fields of the :class:`RawText`."""
    if check_binary:
        check_not_binary(data[:HEAD_BYTES], source)
    removed = data.count(b"\x00")
    if removed:
        data = data.replace(b"\x00", b"")
    _replaced_bytes.count = 0
    text = data.decode("utf-8", errors="bert_mlm_count_replace")
    return RawText(source=source, text=text, replaced_bytes=_replaced_bytes.count + removed, **fields)


# ----------------------------------------------------------------------------- paragraphs and lines
# Where a paragraph ends, in bytes: after a blank line (CRLF too), or with line_by_line after any
# line. Cutting a file there gives the same paragraphs as reading it whole: the cut falls between
# two paragraphs, and never inside a UTF-8 sequence. Blank: only spaces, tabs, vertical tabs, form
# feeds, NBSP or U+3000 (all spaces to normalise()).
_NEWLINE = rb"(?:\r\n|\r(?!\n)|\n)"  # a CR is a line end of its own only when no LF follows
PARAGRAPH_END = {False: re.compile(_NEWLINE + rb"(?:[ \t\x0b\x0c]|\xc2\xa0|\xe3\x80\x80)*" + _NEWLINE),
                 True: re.compile(_NEWLINE)}


def paragraph_cut(block: bytes, hard_limit: int, line_by_line: bool = False) -> int:
    """Where to cut ``block``: after its last paragraph end; 0 (read on) when it has none and is
    under ``hard_limit``; else at the last space or newline, or the last UTF-8 character start.
    Only a paragraph longer than ``hard_limit`` is cut inside; it would be cut into
    ``corpus.max_document_chars`` pieces anyway, so only where one piece ends moves."""
    tail_start = max(0, len(block) - (1 << 20))
    for start in (tail_start, 0) if tail_start else (0,):
        ends = [match.end() for match in PARAGRAPH_END[line_by_line].finditer(block, start)]
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


# A line that ends a sentence: . ! ? … (CJK 。！？ too), then maybe closing quotes or brackets.
_SENTENCE_END = re.compile(r"[.!?…。！？．][\"'”’」』》）)\]]*$")
WRAPPED_WIDTH = 100  # columns (a CJK character counts two): hard-wrapped text is narrower
LINE_SHARE = 0.5  # measured: hard-wrapped books 4-23 % such lines, one-per-line corpora 89-100 %


# A file whose head has a run of this many lines without a blank one, most of them short of the wrap
# width, is not hard-wrapped prose: one document per line (Japanese titles without sentence-final
# punctuation were joined into one 100,000-character document). Verse without stanza breaks
# (Paradise Lost: runs of ~800 lines) fills its lines to the width: 94 % within 3/4 of it, and stays.
LONG_RUN = 200
FULL_SHARE = 0.5


def lines_are_paragraphs(head: bytes) -> tuple[bool, str]:
    """``corpus.line_by_line=auto`` for one file, from its first bytes: whether the lines that a
    hard-wrapped reading would join to the next (a non-empty line followed by another) mostly end a
    sentence or are wider than wrapped text, or run on for hundreds of lines without a blank one
    and mostly short of the width a wrap would fill: then each line is a paragraph. Returns the
    reason too."""
    lines = head.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n").split("\n")[:-1]
    joined = [a.strip() for a, b in zip(lines, lines[1:], strict=False) if a.strip() and b.strip()]
    if len(joined) < 3:
        return False, "almost no line is followed by another without a blank line"
    widths = [len(line) + cjk_characters(line) for line in joined]  # columns: a CJK character counts two
    ends = sum(1 for line, width in zip(joined, widths, strict=True) if _SENTENCE_END.search(line)
               or width > WRAPPED_WIDTH)
    share = ends / len(joined)
    if share >= LINE_SHARE:
        return True, (f"{share:.0%} of its first {len(joined):,} lines followed by another end a sentence or are "
                      f"wider than {WRAPPED_WIDTH} columns; the rule is {LINE_SHARE:.0%}")
    run = max(len(list(group)) for filled, group in itertools.groupby(lines, key=lambda line: bool(line.strip()))
              if filled)
    wrap = sorted(widths)[int(0.9 * (len(widths) - 1))]  # about the width a hard wrap fills
    full = sum(width >= 0.75 * wrap for width in widths) / len(widths)
    if run >= LONG_RUN and full < FULL_SHARE:
        return True, (f"{run:,} lines run on without a blank line and {1 - full:.0%} of them are short of the width "
                      f"a hard wrap fills; only {share:.0%} end a sentence")
    return False, (f"{share:.0%} of its first {len(joined):,} lines followed by another end a sentence or are wider "
                   f"than {WRAPPED_WIDTH} columns; the rule is {LINE_SHARE:.0%}")


def resolve_line_by_line(setting: bool | str, head: bytes, source: str, before: bool | None = None) -> bool:
    """A file's ``corpus.line_by_line``: the setting, or with ``auto`` the file's own, decided on each
    chunk's head (``before``: the previous chunk's decision; logged once per file and at a change)."""
    if setting != "auto":
        return bool(setting)
    decided, why = lines_are_paragraphs(head)
    if decided != before:
        where = "" if before is None else " from here on"
        logger.info("corpus.line_by_line=auto: %r is read %s%s (%s)", source,
                    "one paragraph per line" if decided else "in blank-line paragraphs, wrapped lines joined",
                    where, why)
    return decided


def iter_text_file(file: CorpusFile, chunk_bytes: int = READ_CHUNK_BYTES, storage_options: dict | None = None,
                   line_by_line: bool | str = "auto") -> Iterator[RawText]:
    """A text file in chunks of about ``chunk_bytes``, each ending where a paragraph ends; with
    ``line_by_line: auto``, each chunk is read as its own head says (a file that changes form
    midway is read in both)."""
    source = source_name(file)
    with open_corpus_file(file, storage_options) as handle:
        data = handle.read(max(chunk_bytes, HEAD_BYTES))
        check_not_binary(data[:HEAD_BYTES], source)  # the file's head, whatever the first chunk holds
        one_per_line = resolve_line_by_line(line_by_line, data[:HEAD_BYTES], source)
        block, first = b"", True
        while data:
            block += data
            data = handle.read(chunk_bytes)  # read ahead: at the end, the rest is one chunk
            cut = paragraph_cut(block, 4 * chunk_bytes, one_per_line) if data else 0
            if cut:
                yield decode_text(block[:cut], source, False, starts_source=first, line_by_line=one_per_line)
                block, first = block[cut:], False
                one_per_line = resolve_line_by_line(line_by_line, (block + data)[:HEAD_BYTES], source, one_per_line)
        if block:
            yield decode_text(block, source, False, starts_source=first, line_by_line=one_per_line)
