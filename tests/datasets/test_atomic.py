"""The project's file datasets: an empty output with ``skip_empty`` writes no version, a load says which run
saved it, an optional result loads empty before any run wrote it, and JSON is readable UTF-8."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from kedro.io.core import DatasetError, Version

from bert_mlm.core.record.results import saved_in
from bert_mlm.datasets.atomic import CSVDataset, JSONDataset
from bert_mlm.datasets.pretrained import Classifier, ClassifierDataset

A, B = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"


def test_an_empty_result_leaves_the_last_real_one_the_newest(tmp_path):
    path = str(tmp_path / "finetune_label_mapping.json")
    JSONDataset(filepath=path, version=Version(None, A), skip_empty=True).save({"label_to_id": {"正面": 0}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "save version does not match load version" warning either
        JSONDataset(filepath=path, version=Version(None, B), skip_empty=True).save({})
    assert [p.name for p in (tmp_path / "finetune_label_mapping.json").iterdir()] == [A]
    assert JSONDataset(filepath=path, version=Version(None, None)).load() == {"label_to_id": {"正面": 0}}
    # Readable UTF-8: Chinese labels as they are, not \u6b63 escapes.
    assert '"正面"' in (tmp_path / "finetune_label_mapping.json" / A / "finetune_label_mapping.json").read_text(
        encoding="utf-8")
    # Without skip_empty an empty mapping is a result like any other (a trained vocabulary's coverage: {}).
    JSONDataset(filepath=path, version=Version(None, B)).save({})
    assert len(list((tmp_path / "finetune_label_mapping.json").iterdir())) == 2


def test_nothing_to_save_writes_nothing_where_nothing_was_written_before(tmp_path):
    CSVDataset(filepath=str(tmp_path / "runs.csv"), version=Version(None, A), skip_empty=True).save(pd.DataFrame())
    ClassifierDataset(str(tmp_path / "classifier"), version=Version(None, A)).save(Classifier())
    assert list(tmp_path.iterdir()) == []


def test_optional_results_load_empty_before_any_run_and_know_their_run_after(tmp_path):
    json_path, csv_path = str(tmp_path / "m.json"), str(tmp_path / "r.csv")
    assert JSONDataset(filepath=json_path, version=Version(None, None), optional=True).load() == {}
    empty = CSVDataset(filepath=csv_path, version=Version(None, None), optional=True).load()
    assert empty.empty and saved_in(empty) is None
    with pytest.raises(DatasetError, match="Did not find any versions"):
        JSONDataset(filepath=json_path, version=Version(None, None)).load()  # not optional: the usual error
    CSVDataset(filepath=csv_path, version=Version(None, A)).save(pd.DataFrame({"x": [1, 2]}))
    frame = CSVDataset(filepath=csv_path, version=Version(None, None), optional=True).load()
    assert frame["x"].tolist() == [1, 2] and saved_in(frame) == A
