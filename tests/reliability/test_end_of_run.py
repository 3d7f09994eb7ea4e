"""No crash at the end of a run (issue 47): the reporting nodes whatever stages ran or did not,
``corpus.sources`` given as a YAML list, and TensorBoard on a run that does not fine-tune: each
failed after all the work was done, leaving no metrics, report or card."""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest
import yaml

from bert_mlm.core.evaluate.result import Evaluation, HeldOut
from bert_mlm.core.finetune.result import Estimate, FinetuneResults, RunRow, TaskResult
from bert_mlm.core.record.model_card import ModelCard
from bert_mlm.core.record.run_record import RunRecord
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.train.result import TrainingSummary
from bert_mlm.datasets.run_record import RunRecordDataset
from bert_mlm.pipelines.reporting.nodes import build_run_report, gather_metrics, write_model_card
from tests.kedro_runs import latest, run_session

A, B = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"
QUICK = {"tuning.n_trials": 0, "training.max_steps": 4, "evaluation.mask_draws": 2}


def frame(version: str | None, **columns) -> pd.DataFrame:
    found = pd.DataFrame(columns)
    found.attrs["version"] = version
    return found


def stage_results(evaluated: bool, trained: bool, finetuned: bool, studied: bool) -> dict:
    """The reporting nodes' inputs as the catalog loads them, with each stage present (model B's, saved by
    run B) or absent (None, an empty result or frame: as before any run wrote it)."""
    task = TaskResult("fine-tuned accuracy 0.810 vs 0.790", {"accuracy": Estimate(0.81, 0.01, seeds=[0.8, 0.82])},
                      {"accuracy": Estimate(0.79, 0.01, seeds=[0.78, 0.8])}, Estimate(0.02, 0.01, 0.0, 0.04),
                      [1.0, 0.0], dataset="评论.csv", seeds=[0, 1], majority_accuracy=0.6, train_examples=8,
                      eval_examples=2)
    rows = [RunRow("pretrained", 0, epoch, 0.5, 0.8, 0.7, 1e-4, 0.1, "abc") for epoch in (1, 2)]
    return {
        "evaluation_metrics": Evaluation(HeldOut(loss=6.0, accuracy=0.1, loss_se=0.1, baseline_accuracy=0.05,
                                                 masked_tokens=900, sequences=30, held_out_sequences=40),
                                         "的", 0.15, 7, model_version=B, version=B,
                                         fill_mask_examples=[{"sentence": "北京是中国的[MASK]都。",
                                                              "predictions": [{"token": "首", "score": 0.4}]}])
        if evaluated else None,
        "training_summary": TrainingSummary(train_steps=4, mask_probability=0.15, tuning_run=B if studied else None,
                                            device="cpu", version=B) if trained else None,
        "finetune_metrics": FinetuneResults((task,), B, B) if finetuned else FinetuneResults(),
        "finetune_runs": frame(B if finetuned else None, **pd.DataFrame(rows).to_dict("list") if finetuned else {}),
        "tuning_best_params": TuningRecord("tuning", {"probability": 0.2}, finished_trials=2, version=B)
        if studied else None,
        "tuning_trials": frame(B if studied else None, number=[0, 1], state=["COMPLETE", "COMPLETE"],
                               params_probability=[0.15, 0.2], value=[6.1, 6.0]) if studied else frame(None),
        "training_history": frame(B, step=[1, 2, 3, 4], loss=[9.0, 8.0, 7.5, 7.0], accuracy=[0.0, 0.01, 0.02, 0.03])
        if trained else frame(None),
    }


@pytest.mark.parametrize(("evaluated", "trained", "finetuned", "studied"),
                         list(itertools.product((True, False), repeat=4)))
def test_the_reporting_nodes_never_raise_whatever_stages_ran(tmp_path, evaluated, trained, finetuned, studied):
    inputs = stage_results(evaluated, trained, finetuned, studied)
    records = RunRecordDataset(filepath=str(tmp_path / "run_config.json"))
    if trained:  # the record of the run that trained model B
        from kedro.io.core import Version

        RunRecordDataset(filepath=str(tmp_path / "run_config.json"), version=Version(None, B)).save(
            RunRecord(run_id=B, trained_model=B, env="smoke"))
    facts = RunRecord(run_id=A if not trained else B)
    metrics = gather_metrics(facts, inputs["evaluation_metrics"], inputs["training_summary"],
                             inputs["finetune_metrics"])
    assert json.loads(json.dumps(metrics.to_json()))["model_version"] == (B if evaluated or trained or finetuned
                                                                           else None)
    empty = frame(None)
    page = build_run_report(metrics, inputs["training_history"], empty, empty, empty, inputs["tuning_trials"],
                            inputs["tuning_best_params"], inputs["evaluation_metrics"], inputs["finetune_metrics"],
                            inputs["finetune_runs"], {}, records.load(), facts)
    assert page.startswith("<!DOCTYPE html>") and "None" not in page.replace("NoneType", "")
    assert ("北京是中国的[MASK]都。" in page) == evaluated and ("fine-tuned accuracy 0.810" in page) == finetuned
    card = write_model_card(metrics, records.load())
    assert isinstance(card, ModelCard) and (card.model_version is None) == (metrics.model_version is None)


@pytest.mark.slow
def test_corpus_sources_given_as_a_yaml_list_run_to_the_report(project_copy, monkeypatch, shared_data, tmp_path):
    """The list form the configuration accepts (``- {path: ..., weight: 0.7}``) failed in record_run after
    every stage had run; it is the mapping ``source1``, ``source2`` everywhere now."""
    poems = shared_data / "corpora" / "gutenberg" / "blake-poems.txt"
    wiki = tmp_path / "wiki.txt"
    wiki.write_text((shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8")[
        :40_000], encoding="utf-8")
    sources = {"corpus": {"sources": [{"path": str(poems), "weight": 0.7}, {"path": str(wiki), "weight": 0.3}]}}
    (project_copy / "conf" / "smoke" / "parameters_sources.yml").write_text(yaml.safe_dump(sources))
    run_session(project_copy, monkeypatch, **QUICK)
    data = project_copy / "data"
    record = json.loads(latest(data / "08_reporting" / "run_config.json").read_text(encoding="utf-8"))
    assert record["sections"]["corpus"]["sources"] == {"source1": {"path": str(poems), "weight": 0.7},
                                                       "source2": {"path": str(wiki), "weight": 0.3}}
    assert [(s["name"], s["weight"]) for s in record["corpus"]["sources"]] == [("source1", 0.7), ("source2", 0.3)]
    report = latest(data / "08_reporting" / "run_report.html").read_text(encoding="utf-8")
    assert "source1: " in report and "weight 0.7" in report
    assert json.loads(latest(data / "08_reporting" / "metrics.json").read_text())["eval_loss"] > 0


@pytest.mark.slow
def test_tensorboard_on_a_run_without_fine_tuning_finishes_with_its_event_files(project_copy, monkeypatch):
    """``kedro run --env smoke --params tracking.tensorboard=true`` ended in ``TypeError: object of type
    '_NotRun' has no len()`` after every stage: no fine-tuning is the default."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run_session(project_copy, monkeypatch, **{"tracking.tensorboard": True}, **QUICK)
    (run,) = (project_copy / "data" / "09_tracking" / "tensorboard").iterdir()
    events = accumulator.EventAccumulator(str(run), size_guidance={accumulator.SCALARS: 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "train/loss" in tags and "eval/loss" in tags and not any(tag.startswith("finetune/") for tag in tags)
    assert latest(project_copy / "data" / "08_reporting" / "run_report.html").is_file()
    assert not (project_copy / "data" / "08_reporting" / "finetune_metrics.json").exists()
