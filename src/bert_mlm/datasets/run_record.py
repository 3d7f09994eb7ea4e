"""``run_config``: the run record (:mod:`bert_mlm.core.record.run_record`) as a versioned JSON dataset.

Saved redacted; loaded as :class:`RunRecords`, every run's record: a report describes a model
with the record of the run that trained it, often not the latest run.
"""

from __future__ import annotations

import json
from pathlib import Path

from bert_mlm.core.record.run_record import RunRecord
from bert_mlm.datasets.atomic import AtomicSave, JSONDataset


class RunRecords:
    """The saved run records, by run (version): ``of(version)``, ``latest``, ``versions``."""

    def __init__(self, folder: str | Path, name: str, pinned: str | None = None) -> None:
        self.folder, self.name, self.pinned = Path(folder), name, pinned

    @property
    def versions(self) -> list[str]:
        """Every run that saved a record, newest first."""
        return sorted((p.name for p in self.folder.iterdir() if (p / self.name).is_file()),
                      reverse=True) if self.folder.is_dir() else []

    def of(self, version: str | None) -> RunRecord | None:
        """The record of the run ``version``; None where that run saved none."""
        if not version:
            return None
        path = self.folder / version / self.name
        return RunRecord.from_json(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None

    @property
    def latest(self) -> RunRecord | None:
        """The pinned version's record (``--load-versions run_config:...``), else the newest."""
        return self.of(self.pinned or next(iter(self.versions), None))


class RunRecordDataset(JSONDataset):
    """Saves one run's record (a :class:`RunRecord`) under the run's version, redacted; loads :class:`RunRecords`."""

    def save(self, data: RunRecord) -> None:
        AtomicSave.save(self, data.to_json())  # redacted

    def load(self) -> RunRecords:
        return RunRecords(str(self._filepath), self._filepath.name, self._version.load if self._version else None)

    def _exists(self) -> bool:
        return bool(RunRecords(str(self._filepath), self._filepath.name).versions)
