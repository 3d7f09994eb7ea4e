"""The training summary: made from a training result, its file's keys written and read in one place."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bert_mlm.config import MaskingConfig
from bert_mlm.core.train.loop import TrainingResult
from bert_mlm.core.train.result import TrainingSummary


def result(validated: bool) -> TrainingResult:
    history = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [9.0, 8.0, 7.0, 6.5]})
    if validated:
        history["valid_loss"] = [np.nan, 7.2, np.nan, 7.4]
        history["valid_masked_tokens"] = [np.nan, 900, np.nan, 900]
        history["valid_seconds"] = [np.nan, 1.0, np.nan, 1.0]
    kept = {"kept_step": 2, "kept_valid_loss": 7.2} if validated else {}
    return TrainingResult(history, train_tokens=4096, seconds=8.0, device="cpu", precision="fp32", learning_rate=1e-3,
                          **kept)


def test_the_summary_says_what_was_trained_and_which_step_was_kept():
    summary = TrainingSummary.of(result(True), MaskingConfig(probability=0.2, word_segmenter="auto"),
                                 probability_source="tuning", decision="the study's best", tuning_run="r1",
                                 parameter_count=1234, word_segmenter="rjieba", world_size=1, eval_every=2)
    assert (summary.train_steps, summary.train_tokens_per_second, summary.word_segmenter) == (4, 512.0, "rjieba")
    assert (summary.best_valid_step, summary.best_valid_loss, summary.final_valid_loss) == (2, 7.2, 7.4)
    assert summary.keep_best and summary.kept_step == 2 and summary.valid_share == 2.0 / 10.0
    data = json.loads(json.dumps(summary.to_json()))
    assert data["mask_probability"] == 0.2 and data["tuning_run"] == "r1" and "version" not in data
    assert TrainingSummary.from_json(data, "r2") == summary and TrainingSummary.from_json(data, "r2").version == "r2"


def test_without_validation_its_keys_are_absent_and_an_earlier_file_loads():
    summary = TrainingSummary.of(result(False), MaskingConfig(), probability_source="parameters",
                                 decision="tuning skipped (tuning.n_trials=0)", tuning_run=None, parameter_count=1,
                                 word_segmenter="wordpiece", world_size=1)
    data = summary.to_json()
    assert "best_valid_loss" not in data and data["kept_step"] == 4 and not data["keep_best"]
    earlier = TrainingSummary.from_json({"train_steps": 3, "parameters": 99, "mask_probability_source": "parameters",
                                         "tuning_decision": None})
    assert earlier.parameter_count == 99 and earlier.tuning_decision == "tuning skipped (tuning.n_trials=0)"
    assert TrainingSummary.from_json({"eval_loss": 3.0}) is None  # an evaluation alone: no summary
