"""A versioned dataset whose every version is a directory, written atomically.

The directory is written under a temporary name next to its final place and renamed when it is
complete, so a crash, a kill -9 or a full disk never leaves a half-written version that Kedro
would load as the latest: a version exists only once it is whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractVersionedDataset, DatasetError, Version

from bert_mlm.core.files import written_then_renamed
from bert_mlm.datasets.atomic import SkipsNotRun


class AtomicDirectoryDataset(SkipsNotRun, AbstractVersionedDataset):
    def __init__(self, filepath: str, version: Version | None = None, metadata: dict[str, Any] | None = None):
        super().__init__(PurePosixPath(Path(filepath).as_posix()), version)
        self.metadata = metadata

    def _write_directory(self, fill: Callable[[Path], Any], needed: int | None = None) -> Any:
        """Call ``fill(directory)`` on a new temporary directory path (not yet created), then
        rename it into place. Errors from ``fill`` keep their message (not a dataset wrapper's);
        ``needed``: the bytes it will write, when known, for the message of a full disk."""
        # Not fsynced: token stores reach many GB, and the data stages can be rerun.
        with written_then_renamed(str(self._get_save_path()), sync=False, needed=needed) as temporary:
            return fill(temporary)

    def _load_dir(self) -> Path:
        path = Path(str(self._get_load_path()))
        if not path.is_dir():
            raise DatasetError(f"{path} is not a saved directory")
        return path

    def _exists(self) -> bool:
        try:
            return Path(str(self._get_load_path())).is_dir()
        except DatasetError:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}
