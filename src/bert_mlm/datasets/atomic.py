"""kedro-datasets' file datasets, saved atomically: a version becomes visible only when complete.

kedro-datasets opens the final versioned path and writes into it, so a kill -9 or a full disk
leaves a truncated file that is the newest version, and every later run loads it (a 0-byte CSV
stopped every partial run until the folder was deleted by hand). Here the dataset writes to a
hidden temporary name in the same folder, fsyncs, and renames: the latest-version lookup
(``<filepath>/*/<name>``) never matches a half-written file. Object stores (s3://, gs://...)
publish an object only when its upload completes, so they are written as kedro-datasets does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from kedro_datasets.json import JSONDataset as _JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset as _MatplotlibDataset
from kedro_datasets.pandas import CSVDataset as _CSVDataset
from kedro_datasets.plotly import JSONDataset as _PlotlyJSONDataset
from kedro_datasets.text import TextDataset as _TextDataset


def _fsync_tree(path: Path) -> None:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())


class AtomicSave:
    """Mixin placed before a kedro-datasets file dataset: ``save`` writes a temporary sibling
    and renames it to the version's path."""

    _writing_to: PurePosixPath | None = None

    def _get_save_path(self) -> PurePosixPath:
        return self._writing_to if self._writing_to is not None else super()._get_save_path()

    def save(self, data) -> None:
        inner = self._unwrapped_parent_save()
        if self._protocol != "file":
            inner(self, data)
            return
        final = super()._get_save_path()
        temporary = final.parent / f".{final.name}.tmp-{os.getpid()}"
        self._writing_to = temporary
        try:
            inner(self, data)
            _fsync_tree(Path(temporary))
            os.replace(temporary, final)
        except BaseException:
            if Path(temporary).is_dir():  # a list or dict of figures
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                Path(temporary).unlink(missing_ok=True)
            raise
        finally:
            self._writing_to = None
            self._invalidate_cache()

    def _unwrapped_parent_save(self):
        """The parent dataset's own ``save``, without Kedro's logging/versioning wrapper (this
        class's ``save`` is wrapped already)."""
        for klass in type(self).__mro__:
            if not issubclass(klass, AtomicSave) and "save" in klass.__dict__:
                method = klass.__dict__["save"]
                return getattr(method, "__wrapped__", method)
        raise TypeError(f"{type(self).__name__} has no dataset to save with")


class CSVDataset(AtomicSave, _CSVDataset):
    """``pandas.CSVDataset``, saved atomically."""


class JSONDataset(AtomicSave, _JSONDataset):
    """``json.JSONDataset``, saved atomically."""


class PlotlyJSONDataset(AtomicSave, _PlotlyJSONDataset):
    """``plotly.JSONDataset``, saved atomically."""


class MatplotlibDataset(AtomicSave, _MatplotlibDataset):
    """``matplotlib.MatplotlibDataset``, saved atomically."""


class TextDataset(AtomicSave, _TextDataset):
    """``text.TextDataset``, saved atomically."""
