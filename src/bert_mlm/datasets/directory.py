"""A versioned dataset whose every version is a directory, written under a temporary name and
renamed when complete: a crash, a kill -9 or a full disk never leaves a half-written version that
Kedro would load as the latest."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractVersionedDataset, DatasetError, Version

from bert_mlm.core.common.files import written_then_renamed
from bert_mlm.core.data.reuse import find_reusable, link_or_copy, write_recipe
from bert_mlm.datasets.atomic import SkipsEmpty

logger = logging.getLogger(__name__)


class AtomicDirectoryDataset(SkipsEmpty, AbstractVersionedDataset):
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

    def _write_reusing(self, fill: Callable[[Path], Any], recipe: dict | None, reuse: bool,
                       check: Callable[[Path], Any], needed: int | None = None) -> None:
        """Write a version with ``fill``, recording ``recipe`` (what made it: core/data/reuse.py); when
        ``reuse`` and a stored version has this recipe and passes ``check``, the new version is that
        one's files hard-linked instead: the stage is not recomputed, and the log says so."""
        versions = Path(str(self._filepath))
        previous = find_reusable(versions, recipe, check, versions.name) if reuse and recipe is not None else None
        if previous is not None:
            self._write_directory(lambda directory: shutil.copytree(previous, directory, copy_function=link_or_copy))
            logger.info("%s: this run's inputs, settings and code are those of version %s: reused it (hard links), "
                        "not recomputed (data.reuse=false recomputes)", versions.name, previous.parent.name)
            return

        def fill_and_record(directory: Path) -> None:
            fill(directory)
            if recipe is not None:
                write_recipe(directory, recipe)

        self._write_directory(fill_and_record, needed=needed)

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
