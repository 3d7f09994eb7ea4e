"""The stages' typed results as versioned JSON files (each result's ``to_json`` / ``from_json``),
knowing the run that saved them (``version``). An empty result writes no version; an ``optional``
one no run has written loads as None. A fine-tuning result loads with the newest result of each
other task saved for the same model (:meth:`FinetuneResults.with_earlier`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from kedro_datasets.json import JSONDataset as _JSONDataset

from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.train.result import TrainingSummary
from bert_mlm.datasets.atomic import AtomicSave, JSONDataset
from bert_mlm.errors import UserError

# The catalog's `result:` -> the type its file holds.
RESULTS = {"evaluation": Evaluation, "training": TrainingSummary, "finetune": FinetuneResults,
           "model": ModelResults, "study": TuningRecord}


class ResultDataset(JSONDataset):
    """A versioned JSON file holding one stage's result (``result``: a key of :data:`RESULTS`)."""

    def __init__(self, *, result: str, **kwargs) -> None:
        if result not in RESULTS:
            raise UserError(f"ResultDataset: result {result!r} is not one of {list(RESULTS)}")
        super().__init__(**kwargs)
        self._type = RESULTS[result]

    def holds_nothing(self, data) -> bool:
        return not data

    # Kedro wraps every dataset's load and save (logging, versions); these call the parents' own
    # functions, so that one save resolves its version once.
    def load(self) -> Any:
        if self._missing():
            return self._type() if self._type is FinetuneResults else None
        found = self._type.from_json(_JSONDataset.load.__wrapped__(self))
        found = None if found is None else replace(found, version=self._loaded_version())
        return found.with_earlier(self._earlier(found.version)) if isinstance(found, FinetuneResults) else found

    def _earlier(self, version: str | None):
        """The results of the versions before ``version``, newest first, read as they are needed."""
        paths = sorted(self._glob_function(str(self._get_versioned_path("*"))), reverse=True)
        for path in paths:
            earlier = PurePosixPath(path).parent.name
            if version is not None and earlier < version:
                with self._fs.open(path, mode="r", encoding="utf-8") as file:
                    yield self._type.from_json(json.load(file), earlier)

    def save(self, data) -> None:
        AtomicSave.save(self, data.to_json())
