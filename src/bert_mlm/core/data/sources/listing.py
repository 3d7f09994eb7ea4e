"""Where a corpus's files are: a local file, directory (symlinks followed) or glob, or any fsspec URL
(s3://, gs://, abfs://, http(s)://, hf://); which of them are read, and how messages name them."""

from __future__ import annotations

import glob
import logging
import os
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import fsspec
from fsspec.utils import get_protocol

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.core.data.corpus import SUPPORTED_SUFFIXES, CorpusError
from bert_mlm.errors import first_line

logger = logging.getLogger(__name__)

# Compression is named by the last suffix (or, for a file that does not say, by its magic bytes:
# ``streams``) and undone while streaming, never to disk.
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
ARCHIVES = (".tar", ".tgz", ".zip", ".7z", ".rar")
# The package each protocol needs, and the bert_mlm extra that installs it (fsspec's own message
# names no extra).
PROTOCOL_PACKAGES = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
                     "abfs": ("adlfs", "azure"), "abfss": ("adlfs", "azure"), "az": ("adlfs", "azure"),
                     "http": ("aiohttp", "http"), "https": ("aiohttp", "http"), "hf": ("huggingface_hub", "hf")}
# A corpus file: a local ``Path``, or a URL (``str``) on a remote file system.
CorpusFile = Path | str


def printable(path: str | os.PathLike) -> str:
    """A path as text even when its name is not valid UTF-8 (shown with \\x escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def source_name(file: CorpusFile) -> str:
    return printable(file) if isinstance(file, Path) else redact_text(str(file))


def _path_part(name: str) -> PurePosixPath:
    """The path of ``name``; a URL's query is no suffix (a signed URL ends in ``?X-Amz-Signature=...``)."""
    return PurePosixPath(urlsplit(name).path if "://" in name else name)


def format_suffix(name: str) -> str:
    """The format of ``name`` under its compression: ``books.jsonl.gz`` -> ``.jsonl``."""
    suffixes = [s.lower() for s in _path_part(name).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def compression_of(name: str) -> str | None:
    return COMPRESSIONS.get(_path_part(name).suffix.lower())


def skip_reason(name: str) -> str | None:
    """Why a listed file is not read (``None``: it is read)."""
    suffix = format_suffix(name)
    if suffix in ARCHIVES:
        return f"{suffix} is an archive of files: unpack it and give its folder"
    if suffix not in SUPPORTED_SUFFIXES:
        return f"{suffix or 'no suffix'} is not a corpus format"
    if suffix == ".parquet" and compression_of(name):
        return "a compressed Parquet file cannot be read in row groups (Parquet compresses itself)"
    return None


def remote_filesystem(url: str, storage_options: dict | None, parameter: str = "corpus.path"):
    """The fsspec file system of ``url`` and the path on it; credentials and options the Kedro way
    (a dataset's ``credentials`` merged with its ``fs_args``)."""
    protocol = get_protocol(url)
    try:
        return fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except ImportError as error:
        package, extra = PROTOCOL_PACKAGES.get(protocol, (error.name or "its fsspec backend", None))
        install = f'pip install "bert_mlm[{extra}]"' if extra else f"pip install {package}"
        raise CorpusError(f"{parameter}: reading {protocol}:// paths needs {package}; install it with {install}"
                          ) from error
    except ValueError as error:
        if "Protocol not known" in str(error):
            raise CorpusError(f"{parameter}: {protocol}:// is not a file system fsspec knows ({redact_text(url)!r})"
                              ) from error
        raise CorpusError(f"{parameter}: {redact_text(url)!r}: {redact_text(first_line(error))}") from error


def list_remote_files(url: str, storage_options: dict | None, parameter: str) -> list[tuple[str, int | None]]:
    """Every file of a remote file, directory (recursively) or glob, as (URL, size)."""
    fs, root = remote_filesystem(url, storage_options, parameter)
    shown = redact_text(url)
    try:
        # A name with glob characters that exists as it is written is that name, not a glob.
        is_glob = any(ch in root for ch in "*?[") and not fs.exists(root)
        found = (fs.glob(root, detail=True) if is_glob
                 else fs.find(root, detail=True) if fs.isdir(root) else {root: fs.info(root)})
    except FileNotFoundError as error:
        raise CorpusError(f"{parameter}: {shown!r} does not exist") from error
    except PermissionError as error:
        raise CorpusError(f"{parameter}: access to {shown!r} was refused ({redact_text(first_line(error))}); check the "
                          "credentials (corpus.credentials names an entry of conf/local/credentials.yml)") from error
    except Exception as error:  # each backend raises its own types; the user needs one line
        reason = f"{type(error).__name__}: {redact_text(first_line(error))}"
        raise CorpusError(f"{parameter}: {shown!r} could not be listed ({reason}); is the host reachable and are the "
                          "credentials right?") from error
    if is_glob and not found:
        raise CorpusError(f"{parameter}: the glob {shown!r} matches no file")
    return [(fs.unstrip_protocol(name), info.get("size")) for name, info in sorted(found.items())
            if info.get("type", "file") != "directory"]


def list_local_files(text: str, parameter: str) -> list[tuple[Path, int]]:
    """Every file of a local file, directory (recursively) or glob; a path that exists as it is
    written is that path, even with glob characters in its name (a folder named ``books[2024]``)."""
    if any(ch in text for ch in "*?[") and not Path(text).expanduser().exists():
        candidates = [Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True)]
        if not candidates:
            raise CorpusError(f"{parameter}: the glob {text!r} matches no file")
    else:
        candidate = Path(text).expanduser()
        if not candidate.exists():
            raise CorpusError(f"{parameter}: {text!r} does not exist")
        candidates = walk_files(candidate, parameter) if candidate.is_dir() else [candidate]
    return [(p, p.stat().st_size) for p in sorted(candidates) if p.is_file()]


def list_corpus_files(path: str | os.PathLike, storage_options: dict | None = None,
                      parameter: str = "corpus.path") -> list[tuple[CorpusFile, int | None]]:
    """The corpus files of a file, a directory (recursively) or a glob, local or remote, sorted,
    with their sizes (stored sizes: compressed for compressed files). Files that are not read are
    named in one warning, with why."""
    text = str(path)
    if get_protocol(text) not in ("file", "local"):
        listed = list_remote_files(text, storage_options, parameter)
    else:
        text = text.removeprefix("file://")
        listed = list_local_files(text, parameter)
    files, skipped = [], []
    for file, size in listed:
        why = skip_reason(str(file))
        if why is None:
            files.append((file, size))
        elif not PurePosixPath(str(file)).name.startswith("."):  # hidden files (.DS_Store, .gitkeep): silently
            skipped.append((file, why))
    shown = "; ".join(f"{source_name(f)} ({why})" for f, why in skipped[:10])
    shown += f"; and {len(skipped) - 10} more" if len(skipped) > 10 else ""
    if not files:
        supported = (f"supported are {', '.join(SUPPORTED_SUFFIXES)}, each optionally compressed "
                     f"({', '.join(COMPRESSIONS)})")
        named = PurePosixPath(text.rstrip("/")).name  # the path is the one file (not a folder that holds one)
        if len(listed) == 1 and skipped and PurePosixPath(str(listed[0][0])).name == named:
            raise CorpusError(f"{parameter}: {shown} is not read; {supported}")
        raise CorpusError(f"{parameter}: {redact_text(text)!r} holds no corpus file"
                          f"{': it holds ' + shown if skipped else ''}; {supported}")
    if skipped:
        logger.warning("%s: %d file(s) skipped, not read: %s", parameter, len(skipped), shown)
    return files


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
