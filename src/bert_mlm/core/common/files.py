"""Publishing a file or a directory whole: write under a temporary name, then rename."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bert_mlm.errors import UserError, causes

logger = logging.getLogger(__name__)

# written_then_renamed's temporary names, and Kedro's version folders (2026-12-04T19.00.00.000Z).
TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)$")
VERSION = re.compile(r"^\d{4}-\d\d-\d\dT\d\d\.\d\d\.\d\d\.\d{3}Z$")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync_tree(path: Path) -> None:
    for file in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())


@contextmanager
def written_then_renamed(final: str | os.PathLike, sync: bool = True, artifact: str | None = None,
                         needed: int | None = None) -> Iterator[Path]:
    """Yield a temporary sibling of ``final`` (``.name.tmp-PID``, not created) to write a file or
    a directory into. When the block ends without error it is fsynced (``sync``) and renamed onto
    ``final``; when it fails it is removed. Readers see the previous ``final`` or the complete new
    one, never a part of it; a kill -9 leaves only the temporary name behind.

    A full disk (or quota, or file-size limit) becomes one :class:`UserError` naming ``artifact``
    (default: the file name), ``final`` and the space: ``needed`` bytes when the caller knows
    them, else at least what was written when the disk filled. So does a folder or file system
    that refuses the write (read-only, no permission)."""
    final = Path(final)
    temporary = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        _remove(temporary)
        temporary.parent.mkdir(parents=True, exist_ok=True)
        yield temporary
        if sync:
            _fsync_tree(temporary)
        if final.is_dir():
            shutil.rmtree(final)
        os.replace(temporary, final)
    except BaseException as error:
        full = None if isinstance(error, UserError) else _out_of_space(error, temporary.parent)
        written = _size(temporary) if full is not None and temporary.exists() else 0
        _remove(temporary)
        if full is None:
            refused = None if isinstance(error, UserError) else _refused(error)
            if refused is None:
                raise
            raise UserError(f"{artifact or final.name}: cannot write {final}: {refused}; nothing of it was "
                            "kept") from error
        reason, missing = full
        free = shutil.disk_usage(next(p for p in (temporary.parent, *temporary.parents) if p.exists())).free
        need = f"{_megabytes(needed)} needed" if needed else f"at least {_megabytes(written + missing)} needed"
        raise UserError(f"{artifact or final.name}: {reason} writing {final} ({need}, {_megabytes(written)} written "
                        f"when it stopped, {_megabytes(free)} free there); nothing of it was kept") from error


def _refused(error: BaseException) -> str | None:
    """Why the file system refused the write, when it did: a read-only folder or file system."""
    for cause in causes(error):
        if isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            where = f" ({cause.filename})" if cause.filename else ""
            kind = "a read-only file system" if cause.errno == errno.EROFS else "no write permission there"
            return f"{os.strerror(cause.errno)}{where}: {kind}"
    return None


# numpy's tofile (np.save) reports a short write without an errno.
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")
_FULL = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "disk quota exceeded",
         errno.EFBIG: "file too large (the file-size limit, ulimit -f)"}


# Libraries written in Rust (safetensors, tokenizers) report the OS error in their text only.
_FULL_TEXT = {"No space left on device": errno.ENOSPC, "StorageFull": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
              "QuotaExceeded": errno.EDQUOT, "File too large": errno.EFBIG, "FileTooLarge": errno.EFBIG}


def _out_of_space(error: BaseException, where: Path) -> tuple[str, int] | None:
    """(what ran out, bytes that were still to write) when ``error`` or its cause is a full disk, a
    quota or a file-size limit; ``None`` for any other error."""
    for cause in causes(error):
        if isinstance(cause, OSError):
            if cause.errno in _FULL:
                return _FULL[cause.errno], 0
            short = _SHORT_WRITE.search(str(cause))
            if short:
                missing = int(short.group(1)) - int(short.group(2))
                full = shutil.disk_usage(where).free < missing
                return ("No space left on device" if full else "the file system took only part of a write "
                        "(a full disk, a quota or a file-size limit)"), missing
        text = str(cause)  # pyarrow's OSErrors and safetensors' errors carry the text, not the errno
        for marker, number in _FULL_TEXT.items():
            if marker in text:
                return _FULL[number], 0
    return None


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _size(path: Path) -> int:
    files = [path] if not path.is_dir() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(p.lstat().st_size for p in files)


def remove_dead_temporaries(root: str | os.PathLike) -> list[Path]:
    """Remove the temporaries under ``root`` that :func:`written_then_renamed` left behind when its
    process was killed (their pid no longer runs), and the version folders they leave empty.
    Call it while holding the project's run lock: a temporary of a live process is kept."""
    removed, freed = [], 0
    for directory, subdirectories, files in os.walk(root):
        here = [Path(directory, name) for name in (*subdirectories, *files)
                if (match := TEMPORARY.match(name)) and not _process_exists(int(match.group(1)))]
        for path in here:
            freed += _size(path)
            _remove(path)
        removed += here
        subdirectories[:] = [d for d in subdirectories if not TEMPORARY.match(d)]
        folder = Path(directory)
        if here and VERSION.match(folder.name) and not any(folder.iterdir()):
            folder.rmdir()
    if removed:
        logger.info("Removed %d unfinished write(s) of killed runs (%.1f MB): %s", len(removed), freed / 1e6,
                    ", ".join(str(p) for p in removed[:5]) + (" ..." if len(removed) > 5 else ""))
    return removed


def remove_empty_versions(root: str | os.PathLike, since: float) -> list[Path]:
    """Remove the empty version folders under ``root`` made at or after ``since`` (a time stamp),
    and their dataset's folder when it holds no other version:
    a save that failed removed its temporary but not the version folder made for it, which would
    list a version that does not exist."""
    empty = [Path(directory) for directory, subdirectories, files in os.walk(root)
             if VERSION.match(Path(directory).name) and not subdirectories and not files
             and Path(directory).stat().st_mtime >= since]
    for folder in empty:
        folder.rmdir()
        if not any(folder.parent.iterdir()):  # the dataset's folder, made for that version alone
            folder.parent.rmdir()
    return empty
