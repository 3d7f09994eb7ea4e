"""Publishing a file or a directory whole: write under a temporary name, then rename."""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
def written_then_renamed(final: str | os.PathLike, sync: bool = True) -> Iterator[Path]:
    """Yield a temporary sibling of ``final`` (``.name.tmp-PID``, not created) to write a file or
    a directory into. When the block ends without error it is fsynced (``sync``) and renamed onto
    ``final``; when it fails it is removed. Readers see the previous ``final`` or the complete new
    one, never a part of it; a kill -9 leaves only the temporary name behind."""
    final = Path(final)
    temporary = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    _remove(temporary)
    temporary.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield temporary
        if sync:
            _fsync_tree(temporary)
        if final.is_dir():
            shutil.rmtree(final)
        os.replace(temporary, final)
    except BaseException:
        _remove(temporary)
        raise


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
