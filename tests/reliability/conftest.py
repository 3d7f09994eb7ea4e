"""Helpers of the reliability tests."""

from __future__ import annotations

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
