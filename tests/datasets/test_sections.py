"""A parameter section as a dataset: the masking (and training) section the tuning stage resolved."""

from __future__ import annotations

import json

import pytest
from kedro.io.core import DatasetError, Version

from bert_mlm.config import MaskingConfig, TrainingConfig
from bert_mlm.datasets import SectionDataset
from bert_mlm.errors import UserError


def test_a_section_saves_as_json_and_loads_typed(tmp_path):
    masking = MaskingConfig(probability=0.3, whole_word=True)
    dataset = SectionDataset(section="masking", filepath=str(tmp_path / "masking.json"), version=Version(None, None))
    dataset.save(masking)
    (version,) = (tmp_path / "masking.json").iterdir()
    assert json.loads((version / "masking.json").read_text()) == masking.model_dump()
    loaded = SectionDataset(section="masking", filepath=str(tmp_path / "masking.json"),
                            version=Version(None, None)).load()
    assert loaded == masking and isinstance(loaded, MaskingConfig)
    assert json.loads(dataset.preview())["probability"] == 0.3


def test_no_section_is_an_empty_mapping(tmp_path):
    dataset = SectionDataset(section="training", filepath=str(tmp_path / "training.json"))
    dataset.save({})
    assert (tmp_path / "training.json").read_text() == "{}" and dataset.load() == {}
    dataset.save(TrainingConfig(max_steps=3))
    assert dataset.load() == TrainingConfig(max_steps=3)


def test_a_hand_edited_file_is_refused_as_a_parameter_is(tmp_path):
    path = tmp_path / "masking.json"
    path.write_text(json.dumps({"probability": "0.3"}))
    with pytest.raises(DatasetError) as raised:
        SectionDataset(section="masking", filepath=str(path)).load()
    assert isinstance(raised.value.__cause__, UserError)
    assert str(raised.value.__cause__) == (
        f"{path}: masking.probability: '0.3' must be a number in the open interval (0, 1)")
    with pytest.raises(UserError, match=r"section 'maskng' is not one of"):
        SectionDataset(section="maskng", filepath=str(path))
