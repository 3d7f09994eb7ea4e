"""``tuning_best_params``: the typed tuning record through its versioned JSON file."""

from __future__ import annotations

import json
import warnings

import pytest
from kedro.io.core import DatasetError, Version

from bert_mlm.core.study.record import Confirmation, TuningRecord
from bert_mlm.datasets import TuningRecordDataset
from bert_mlm.errors import UserError


def test_a_record_saves_once_per_version_and_loads_typed(tmp_path):
    record = TuningRecord("tuning", {"probability": 0.3}, {"learning_rate": 1e-3}, study_name="s", best_trial=1,
                          best_value=4.0, objective="eval_loss", finished_trials=2,
                          confirmation=Confirmation([4.0], [4.1], 0.15, 0.1, 0.05, 0.15, True, "clear"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no save/load version mismatch: the version is resolved once
        TuningRecordDataset(filepath=str(tmp_path / "best.json"), version=Version(None, None)).save(record)
    versions = list((tmp_path / "best.json").iterdir())
    assert len(versions) == 1 and [p.name for p in versions[0].iterdir()] == ["best.json"]
    loaded = TuningRecordDataset(filepath=str(tmp_path / "best.json"), version=Version(None, None)).load()
    assert loaded == record and isinstance(loaded.confirmation, Confirmation)


def test_a_file_of_an_earlier_version_loads(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"masking": {"probability": 0.2}, "source": "parameters"}))
    loaded = TuningRecordDataset(filepath=str(path)).load()
    assert loaded == TuningRecord("parameters", {"probability": 0.2})
    assert loaded.summary["mask_probability_source"] == "parameters"


def test_a_bad_source_is_one_user_error(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"source": "guess"}))
    with pytest.raises(DatasetError) as raised:
        TuningRecordDataset(filepath=str(path)).load()
    assert isinstance(raised.value.__cause__, UserError) and "source 'guess'" in str(raised.value.__cause__)


def test_kedro_viz_previews_the_file(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"masking": {"probability": 0.2}, "source": "parameters"}))
    assert json.loads(TuningRecordDataset(filepath=str(path)).preview()) == {"masking": {"probability": 0.2},
                                                                             "source": "parameters"}
