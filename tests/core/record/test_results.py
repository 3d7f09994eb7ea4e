"""Which model a result belongs to, and one model's results gathered (metrics.json)."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace

import pandas as pd

from bert_mlm.core.evaluate.result import Evaluation, HeldOut
from bert_mlm.core.finetune.result import FinetuneResults, TaskResult
from bert_mlm.core.record.results import ModelResults, collect, reported_model, saved_in
from bert_mlm.core.train.result import TrainingSummary

A, B, C = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z", "2026-01-03T00.00.00.000Z"


def evaluation(model: str, run: str) -> Evaluation:
    return Evaluation(HeldOut(loss=6.0, accuracy=0.1, baseline_accuracy=0.05), "的", 0.15, 0, model_version=model,
                      fill_mask_examples=[{"sentence": "北京是中国的[MASK]都。", "predictions": [{"token": "首"}]}],
                      version=run)


def finetune(model: str, run: str) -> FinetuneResults:
    task = TaskResult.from_json({"finetune_summary": "pretraining gained", "finetune_accuracy": 0.8,
                                 "finetune_seed_accuracy": [0.8], "finetune_example_accuracy": [1.0, 0.0]})
    return FinetuneResults((task,), model, run)


def training(steps: int, run: str) -> TrainingSummary:
    return TrainingSummary(train_steps=steps, version=run)


def test_a_result_knows_the_run_that_saved_it():
    frame = pd.DataFrame({"a": [1]})
    frame.attrs["version"] = A
    assert saved_in(frame) == A and saved_in(training(3, B)) == B and saved_in(None) is None
    copy = pickle.loads(pickle.dumps(finetune(A, C)))
    assert copy == finetune(A, C) and copy.version == C  # a ParallelRunner worker sees the version too


def test_the_reported_model_is_the_one_this_run_used_else_the_newest():
    old_finetune = finetune(A, A)
    # `--pipelines reporting` (run C): the newest model any result names.
    assert reported_model(C, evaluation(B, B), training(3, B), old_finetune) == B
    # `--pipelines finetune` of model A in run C (--load-versions trained_model:A): the model it fine-tuned.
    assert reported_model(C, evaluation(B, B), training(3, B), finetune(A, C)) == A
    # `--pipelines evaluation` of model A in run C.
    assert reported_model(C, evaluation(A, C), training(3, B), FinetuneResults()) == A
    assert reported_model(C, None, None, FinetuneResults()) is None  # no stage has run yet


def test_results_of_another_model_stay_out_of_metrics_json():
    metrics = collect(C, evaluation(B, B), training(3, B), finetune(A, A))
    data = metrics.to_json()
    assert data["model_version"] == B and data["evaluated_in_run"] == B and data["train_steps"] == 3
    assert not any(key.startswith("finetune") for key in data) and "finetuned_in_run" not in data
    assert list(data)[-1] == "fill_mask_examples"
    refreshed = collect(C, evaluation(B, B), training(3, B), finetune(B, C)).to_json()
    assert refreshed["finetuned_in_run"] == C and refreshed["finetune_summary"] == "pretraining gained"
    assert "finetune_example_accuracy" not in refreshed  # the per-example vector stays in finetune_metrics
    # A model trained after the newest evaluation (`--pipelines training`): not evaluated yet.
    later = collect(C, evaluation(A, A), training(5, C), FinetuneResults())
    assert later.model_version == C and later.evaluation is None and later.to_json()["train_steps"] == 5


def test_metrics_json_reads_back_typed_and_its_tokens_are_results_not_secrets():
    metrics = collect(B, evaluation(B, B), training(3, B), finetune(B, C))
    text = json.dumps(metrics.to_json(), ensure_ascii=False)
    again = ModelResults.from_json(json.loads(text))
    assert again.evaluation == replace(metrics.evaluation, version=B) and again.evaluation.version == B
    assert again.finetune.version == C and again.training.train_steps == 3
    assert again.evaluation.baseline_token == "的" and again.evaluation.fill_mask_examples[0]["predictions"] == [
        {"token": "首"}]


def test_a_metrics_json_of_an_earlier_version_loads():
    earlier = {"model_version": A, "eval_loss": 6.1, "eval_accuracy": 0.12, "baseline_accuracy": 0.06,
               "train_steps": 3, "parameters": 1234, "mask_probability": 0.15, "tuning_decision": None}
    results = ModelResults.from_json(earlier)
    assert results.evaluation.test.loss == 6.1 and results.evaluation.test.loss_se is None
    assert results.training.parameter_count == 1234 and "parameters" not in results.to_json()  # renamed
    assert not results.finetune
