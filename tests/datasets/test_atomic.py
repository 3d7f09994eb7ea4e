"""The project's file datasets: a NOT_RUN output writes no version, a load says which run saved it,
and an optional result loads empty before any run wrote it."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from kedro.io.core import DatasetError, Version

from bert_mlm.core.record.results import NOT_RUN, saved_in
from bert_mlm.datasets.atomic import CSVDataset, JSONDataset
from bert_mlm.datasets.pretrained import ClassifierDataset

A, B = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"


def test_a_not_run_result_leaves_the_last_real_one_the_newest(tmp_path):
    path = str(tmp_path / "finetune_metrics.json")
    JSONDataset(filepath=path, version=Version(None, A)).save({"finetune_summary": "real"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "save version does not match load version" warning either
        JSONDataset(filepath=path, version=Version(None, B)).save(NOT_RUN)
    assert [p.name for p in (tmp_path / "finetune_metrics.json").iterdir()] == [A]
    loaded = JSONDataset(filepath=path, version=Version(None, None)).load()
    assert loaded == {"finetune_summary": "real"} and saved_in(loaded) == A


def test_not_run_writes_nothing_where_nothing_was_written_before(tmp_path):
    CSVDataset(filepath=str(tmp_path / "runs.csv"), version=Version(None, A)).save(NOT_RUN)
    ClassifierDataset(str(tmp_path / "classifier"), version=Version(None, A)).save(NOT_RUN)
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
