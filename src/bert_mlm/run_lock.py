"""One ``kedro run`` at a time per project.

Kedro loads the newest version of each dataset, so two runs in one project load each other's
outputs (a report showed one run's corpus beside the other run's metrics). A run therefore holds
an exclusive lock on ``data/.bert-mlm-run.lock`` from its first node to its end; a second run
stops at once with a message naming the first.

The lock is ``filelock``'s: the kernel drops it when the holder exits, a kill -9 included, so it
never goes stale. Who holds it (pid, start, the redacted command line) is written to
``data/.bert-mlm-run.holder.json``, mode 0600 (filelock owns the lock file's contents). Both files
are removed when the run ends; unlinking a locked file is safe with filelock >= 4 (a contender
that opened the old file starts again on a fresh one).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time
from contextlib import suppress
from pathlib import Path

from filelock import FileLock, Timeout

from bert_mlm.core.common.redaction import redact
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

LOCK_NAME = ".bert-mlm-run.lock"
HOLDER_NAME = ".bert-mlm-run.holder.json"
PRIVATE = 0o600
# A contender waits this long: enough to step over a lock file its holder is removing as it ends.
CONTENTION_SECONDS = 0.5
_held: dict[Path, tuple[FileLock, int]] = {}  # lock path -> the held lock and the pid that took it


def lock_path(project_path: str | os.PathLike) -> Path:
    return Path(project_path) / "data" / LOCK_NAME


def holder_path(project_path: str | os.PathLike) -> Path:
    return Path(project_path) / "data" / HOLDER_NAME


def acquire(project_path: str | os.PathLike) -> Path:
    path = lock_path(project_path)
    release(project_path)  # a run of this process that ended without its release hook
    lock = FileLock(path, mode=PRIVATE, timeout=CONTENTION_SECONDS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
        raise UserError(f"another kedro run is using this project ({_describe(holder_path(project_path))}); runs in "
                        "one project would load each other's dataset versions. Wait for it to finish, or run the "
                        f"second one from a copy of the project (lock: {path})") from None
    except OSError as error:  # a read-only or full project folder: no run could write its outputs there either
        raise UserError(f"data: cannot take the run lock {str(path)!r} ({error.strerror or error}); a run writes "
                        "its outputs under data/, which must be writable") from error
    _held[path] = (lock, os.getpid())
    holder = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": redact(" ".join(sys.argv))[:300]}
    try:
        _write_private(holder_path(project_path), json.dumps(holder))
    except OSError as error:  # a full disk: the lock holds all the same; a contender says "holder unknown"
        logger.warning("run lock: could not write %s (%s)", holder_path(project_path), error)
    return path


def release(project_path: str | os.PathLike) -> None:
    """Remove the holder file and the lock file, then unlock (see the module's docstring)."""
    path = lock_path(project_path)
    lock, owner = _held.pop(path, (None, None))
    if owner != os.getpid():  # none held, or a forked child's: the lock and its files are its parent's
        return
    with suppress(OSError):
        holder_path(project_path).unlink()
    with suppress(OSError):  # Windows cannot remove an open file: filelock removes it after unlocking
        path.unlink()
    lock.release()


def _release_all() -> None:  # an exit without the release hook (an interrupt between hooks)
    for path in list(_held):
        release(path.parent.parent)


atexit.register(_release_all)


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable and writable by this user only, whatever the umask."""
    path.unlink(missing_ok=True)  # a file left by a killed run keeps its old mode when opened: start afresh
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE), "w") as handle:
        handle.write(text)


def _describe(path: Path) -> str:
    try:
        holder = json.loads(path.read_text() or "{}")
        return f"pid {holder['pid']}, started {holder['started']}: {redact(holder['command'])}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"
