"""One ``kedro run`` at a time per project.

Kedro loads the newest version of each dataset, so two runs in one project load each other's
outputs (a report showed one run's corpus beside the other run's metrics). A run therefore holds
an exclusive lock on ``data/.bert-mlm-run.lock`` from its first node to its end; a second run
stops at once with a message naming the first. The lock is ``flock``: the kernel drops it when
the holder exits, a kill -9 included, so it never goes stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from bert_mlm.core.errors import UserError

LOCK_NAME = ".bert-mlm-run.lock"
_held: dict[Path, int] = {}  # lock path -> open descriptor, this process's


def lock_path(project_path: str | os.PathLike) -> Path:
    return Path(project_path) / "data" / LOCK_NAME


def acquire(project_path: str | os.PathLike) -> Path:
    path = lock_path(project_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    release(project_path)  # a run of this process that ended without its release hook
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(path)
        os.close(descriptor)
        raise UserError(
            f"another kedro run is using this project ({holder}); runs in one project would load each "
            f"other's dataset versions. Wait for it to finish, or run the second one from a copy of the "
            f"project (lock: {path})"
        ) from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                     "command": " ".join(sys.argv)[:300]}).encode())
    _held[path] = descriptor
    return path


def release(project_path: str | os.PathLike) -> None:
    descriptor = _held.pop(lock_path(project_path), None)
    if descriptor is not None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


def _describe(path: Path) -> str:
    try:
        holder = json.loads(path.read_text() or "{}")
        return f"pid {holder['pid']}, started {holder['started']}: {holder['command']}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"
