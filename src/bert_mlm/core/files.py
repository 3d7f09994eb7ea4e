"""Publishing a file or a directory whole: write under a temporary name, then rename."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
