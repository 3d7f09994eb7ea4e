"""``tuning_best_params`` as a Kedro dataset: the :class:`~bert_mlm.core.study.record.TuningRecord`
stored as JSON (saved atomically). Files of earlier versions hold the same keys and load as they are."""

from __future__ import annotations

import json
from dataclasses import replace

from kedro_datasets._typing import JSONPreview
from kedro_datasets.json import JSONDataset as _JSONDataset

from bert_mlm.core.study.record import TuningRecord
from bert_mlm.datasets.atomic import AtomicSave, JSONDataset


class TuningRecordDataset(JSONDataset):
    """A versioned JSON file holding a :class:`TuningRecord`."""

    # Kedro wraps every dataset's load and save (logging, versions); these call the parents' own
    # functions, so that one save resolves its version once.
    def load(self) -> TuningRecord | None:
        """The record, with ``version``: the run that saved it (the study's run); None with
        ``optional: true`` where no run has saved one."""
        if self._missing():
            return None
        return replace(TuningRecord.from_json(_JSONDataset.load.__wrapped__(self)), version=self._loaded_version())

    def save(self, data: TuningRecord) -> None:
        AtomicSave.save(self, data.to_json())

    def preview(self) -> JSONPreview:
        """The file as kedro-viz shows a JSON dataset (the parent's preview would dump the class)."""
        return JSONPreview(json.dumps(_JSONDataset.load.__wrapped__(self)))
