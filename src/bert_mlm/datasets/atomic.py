"""kedro-datasets' file datasets, saved atomically: a version becomes visible only when complete.

kedro-datasets opens the final versioned path and writes into it, so a kill -9 or a full disk
leaves a truncated file that is the newest version, and every later run loads it (a 0-byte CSV
stopped every partial run until the folder was deleted by hand). Here the dataset writes to a
hidden temporary name in the same folder, fsyncs, and renames: the latest-version lookup
(``<filepath>/*/<name>``) never matches a half-written file. Object stores (s3://, gs://...)
publish an object only when its upload completes, so they are written as kedro-datasets does.

Also: ``skip_empty`` (:class:`SkipsEmpty`), ``optional`` (:class:`OptionalLoad`), and a load says
which run saved it (:func:`bert_mlm.core.record.results.saved_in`). JSON is readable UTF-8 (Chinese
as it is). Results are not redacted (a fill-mask token is a result; the settings they quote are
redacted where they are made).
"""

from __future__ import annotations

import functools
import json
from pathlib import PurePosixPath

import pandas as pd
from kedro_datasets._typing import JSONPreview
from kedro_datasets.json import JSONDataset as _JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset as _MatplotlibDataset
from kedro_datasets.pandas import CSVDataset as _CSVDataset
from kedro_datasets.plotly import JSONDataset as _PlotlyJSONDataset
from kedro_datasets.text import TextDataset as _TextDataset

from bert_mlm.core.common.files import written_then_renamed


class SkipsEmpty:
    """Mixin of a versioned dataset: a value that holds nothing (:meth:`holds_nothing`; with
    ``skip_empty: true`` in the catalog, an empty frame or mapping: a stage that did not run)
    writes no version, so the newest version stays the last real one. Kedro's versioned save checks afterwards that the
    version it just saved is the newest (a warning otherwise, an error where there is none), so
    the skip wraps Kedro's wrapper instead of living inside ``save``."""

    skip_empty = False

    def holds_nothing(self, data) -> bool:
        return self.skip_empty and len(data) == 0

    @classmethod
    def _save_wrapper(cls, save_func):
        saving = super()._save_wrapper(save_func)

        @functools.wraps(save_func)
        def save(self, data) -> None:
            if not self.holds_nothing(data):
                saving(self, data)

        return save


class AtomicSave(SkipsEmpty):
    """Mixin placed before a kedro-datasets file dataset: ``save`` writes a temporary sibling
    and renames it to the version's path."""

    _writing_to: PurePosixPath | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        """Kedro-viz previews only what a run wrote (``kedro viz build`` warned for each variant never
        run); ``functools.wraps`` keeps the return annotation, from which kedro-viz picks the view."""
        super().__init_subclass__(**kwargs)
        original = getattr(cls, "preview", None)
        if original is None or getattr(original, "written_only", False):
            return

        @functools.wraps(original)
        def preview(self, *args, **kwargs):
            return None if self._version is not None and not self.exists() else original(self, *args, **kwargs)

        preview.written_only = True
        cls.preview = preview

    def _get_save_path(self) -> PurePosixPath:
        return self._writing_to if self._writing_to is not None else super()._get_save_path()

    def save(self, data) -> None:
        # The kedro-datasets dataset's own save, without Kedro's logging/versioning wrapper (this
        # class's save is wrapped already).
        parent = super().save
        inner = getattr(parent, "__wrapped__", parent.__func__)
        if self._protocol != "file":
            inner(self, data)
            return
        try:
            with written_then_renamed(str(super()._get_save_path())) as temporary:
                self._writing_to = PurePosixPath(temporary.as_posix())
                inner(self, data)
        finally:
            self._writing_to = None
            self._invalidate_cache()


class OptionalLoad:
    """Mixin: ``optional: true`` loads an empty result (``{}``, an empty frame) where no run has
    written the dataset, for the report of a run that has not trained or fine-tuned yet;
    ``skip_empty: true``: see :class:`SkipsEmpty`."""

    def __init__(self, *, optional: bool = False, skip_empty: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.optional, self.skip_empty = optional, skip_empty

    def _missing(self) -> bool:
        return self.optional and not self.exists()

    def _loaded_version(self) -> str | None:
        return self.resolve_load_version() if self._version else None


class CSVDataset(OptionalLoad, AtomicSave, _CSVDataset):
    """``pandas.CSVDataset``, saved atomically; the frame's ``attrs["version"]`` is the run that saved it."""

    def load(self) -> pd.DataFrame:
        missing = self._missing()
        frame = pd.DataFrame() if missing else _CSVDataset.load.__wrapped__(self)
        frame.attrs["version"] = None if missing else self._loaded_version()
        return frame


class JSONDataset(OptionalLoad, AtomicSave, _JSONDataset):
    """``json.JSONDataset``, saved atomically as readable UTF-8; a load of an optional dataset that
    no run has written is ``{}``."""

    def __init__(self, *, save_args: dict | None = None, fs_args: dict | None = None, **kwargs) -> None:
        fs_args = dict(fs_args or {})
        for mode in ("open_args_save", "open_args_load"):
            fs_args[mode] = {"encoding": "utf-8", **fs_args.get(mode, {})}
        super().__init__(save_args={"ensure_ascii": False, **(save_args or {})}, fs_args=fs_args, **kwargs)

    def load(self):
        return {} if self._missing() else _JSONDataset.load.__wrapped__(self)

    def preview(self) -> JSONPreview:
        """The file as kedro-viz shows a JSON dataset (not what a subclass loads it as)."""
        return JSONPreview(json.dumps(JSONDataset.load.__wrapped__(self), ensure_ascii=False))


class PlotlyJSONDataset(AtomicSave, _PlotlyJSONDataset):
    """``plotly.JSONDataset``, saved atomically."""


class MatplotlibDataset(AtomicSave, _MatplotlibDataset):
    """``matplotlib.MatplotlibDataset``, saved atomically."""


class TextDataset(AtomicSave, _TextDataset):
    """``text.TextDataset``, saved atomically."""
