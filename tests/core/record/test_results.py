"""Which model a result belongs to, and one model's results gathered (metrics.json)."""

from __future__ import annotations

import pickle

import pandas as pd

from bert_mlm.core.finetune.runs import for_metrics_json
from bert_mlm.core.record.results import NOT_RUN, Saved, collect_metrics, reported_model, saved_in, with_current_names

A, B, C = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z", "2026-01-03T00.00.00.000Z"


def evaluation(model: str, run: str) -> Saved:
    return Saved({"eval_loss": 6.0, "model_version": model, "fill_mask_examples": [{"sentence": "a [MASK]"}]}, run)


def finetune(model: str, run: str) -> Saved:
    return Saved({"finetune_summary": "pretraining gained", "finetune_model_version": model,
                  "finetune_example_accuracy": [1.0, 0.0]}, run)


def test_a_result_knows_the_run_that_saved_it():
    frame = pd.DataFrame({"a": [1]})
    frame.attrs["version"] = A
    assert saved_in(frame) == A and saved_in(Saved({}, B)) == B and saved_in({}) is None
    copy = pickle.loads(pickle.dumps(Saved({"x": 1}, C)))
    assert copy == {"x": 1} and copy.version == C  # a ParallelRunner worker sees the version too
    assert not NOT_RUN and pickle.loads(pickle.dumps(NOT_RUN)) is NOT_RUN


def test_the_reported_model_is_the_one_this_run_used_else_the_newest():
    training, old_finetune = Saved({"train_steps": 3}, B), finetune(A, A)
    # `--pipelines reporting` (run C): the newest model any result names.
    assert reported_model(C, evaluation(B, B), training, old_finetune) == B
    # `--pipelines finetune` of model A in run C (--load-versions trained_model:A): the model it fine-tuned.
    assert reported_model(C, evaluation(B, B), training, finetune(A, C)) == A
    # `--pipelines evaluation` of model A in run C.
    assert reported_model(C, evaluation(A, C), training, {}) == A
    assert reported_model(C, Saved(), Saved(), Saved()) is None


def test_results_of_another_model_stay_out_of_metrics_json():
    metrics = collect_metrics(C, evaluation(B, B), Saved({"train_steps": 3, "parameters": 1234}, B), finetune(A, A),
                              for_metrics=for_metrics_json)
    assert metrics["model_version"] == B and metrics["evaluated_in_run"] == B
    assert metrics["parameter_count"] == 1234 and "parameters" not in metrics  # a training summary of before
    assert not any(key.startswith("finetune") for key in metrics) and "finetuned_in_run" not in metrics
    assert list(metrics)[-1] == "fill_mask_examples"
    refreshed = collect_metrics(C, evaluation(B, B), Saved({"train_steps": 3}, B), finetune(B, C),
                                for_metrics=for_metrics_json)
    assert refreshed["finetuned_in_run"] == C and refreshed["finetune_summary"] == "pretraining gained"
    assert "finetune_example_accuracy" not in refreshed  # the per-example vector stays in finetune_metrics
    # A model trained after the newest evaluation (`--pipelines training`): not evaluated yet.
    later = collect_metrics(C, evaluation(A, A), Saved({"train_steps": 5}, C), {})
    assert later["model_version"] == C and "eval_loss" not in later and later["train_steps"] == 5


def test_keys_of_earlier_versions_are_renamed():
    assert with_current_names({"parameters": 10, "mask_probability": 0.15}) == {"parameter_count": 10,
                                                                                  "mask_probability": 0.15}
