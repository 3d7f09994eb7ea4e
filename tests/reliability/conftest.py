"""Helpers of the reliability tests."""

from __future__ import annotations

import concurrent.futures
import contextlib
import subprocess
from pathlib import Path

import pytest


def mount_tmpfs(path: Path, options: str) -> Path:
    """A real tmpfs at ``path`` (``options``: ``size=1m,ro``...), or the test skipped where mounting is not allowed."""
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({options}) here: {mounted.stderr.decode().strip()}")
    return path


@contextlib.contextmanager
def mounted_tmpfs(path: Path, options: str):
    """:func:`mount_tmpfs` for the ``with`` block, unmounted after it: lazily, as a file still open then (a failed
    write's, kept by the traceback ``pytest.raises`` holds) made a plain umount fail and left the tmpfs mounted."""
    mount_tmpfs(path, options)
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True)


def on_a_short_stack(function, *args, **kwargs):
    """``function(*args, **kwargs)`` run in a thread of its own, its result returned (its exception raised) here.

    Kedro's settings loader (dynaconf) calls ``inspect.stack()``, source lines and all, at every
    ``bootstrap_project``: under pytest's ~60 frames that was half the CPU of an in-process ``kedro run``
    that stops at a user error (0.27 s a call, 0.12 s from a new thread's short stack). Nothing the run
    does depends on its thread: the project sets no signal handler and asks for no main thread."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args, **kwargs).result()
