"""The stages' typed results through their versioned JSON files: the tuning record, the fine-tuning
results (none written where no task ran), the evaluation with its fill-mask tokens intact."""

from __future__ import annotations

import json
import warnings

import pytest
from kedro.io.core import DatasetError, Version

from bert_mlm.core.evaluate.result import Evaluation, HeldOut
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.study.record import Confirmation, TuningRecord
from bert_mlm.datasets import ResultDataset
from bert_mlm.errors import UserError

A, B = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"


def study_dataset(**kwargs) -> ResultDataset:
    """The catalog's tuning_best_params."""
    return ResultDataset(result="study", **kwargs)


def test_a_record_saves_once_per_version_and_loads_typed(tmp_path):
    record = TuningRecord("tuning", {"probability": 0.3}, {"learning_rate": 1e-3}, study_name="s", best_trial=1,
                          best_value=4.0, objective="eval_loss", finished_trials=2,
                          confirmation=Confirmation([4.0], [4.1], 0.15, 0.1, 0.05, 0.15, True, "clear"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no save/load version mismatch: the version is resolved once
        study_dataset(filepath=str(tmp_path / "best.json"), version=Version(None, None)).save(record)
    versions = list((tmp_path / "best.json").iterdir())
    assert len(versions) == 1 and [p.name for p in versions[0].iterdir()] == ["best.json"]
    loaded = study_dataset(filepath=str(tmp_path / "best.json"), version=Version(None, None)).load()
    assert loaded == record and isinstance(loaded.confirmation, Confirmation)


def test_a_file_of_an_earlier_version_loads(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"masking": {"probability": 0.2}, "source": "parameters"}))
    loaded = study_dataset(filepath=str(path)).load()
    assert loaded == TuningRecord("parameters", {"probability": 0.2})
    assert loaded.probability_source == "parameters"


def test_a_bad_source_is_one_user_error(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"source": "guess"}))
    with pytest.raises(DatasetError) as raised:
        study_dataset(filepath=str(path)).load()
    assert isinstance(raised.value.__cause__, UserError) and "source 'guess'" in str(raised.value.__cause__)


def test_kedro_viz_previews_the_file(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"masking": {"probability": 0.2}, "source": "parameters"}))
    assert json.loads(study_dataset(filepath=str(path)).preview()) == {"masking": {"probability": 0.2},
                                                                             "source": "parameters"}


def test_no_fine_tuning_writes_no_version_and_an_unwritten_result_loads_as_none(tmp_path):
    path = str(tmp_path / "finetune_metrics.json")
    ResultDataset(result="finetune", filepath=path, version=Version(None, A)).save(
        FinetuneResults.from_json({"finetune_summary": "real", "finetune_accuracy": 0.8}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "save version does not match load version" warning either
        ResultDataset(result="finetune", filepath=path, version=Version(None, B)).save(FinetuneResults())
    assert [p.name for p in (tmp_path / "finetune_metrics.json").iterdir()] == [A]
    loaded = ResultDataset(result="finetune", filepath=path, version=Version(None, None)).load()
    assert loaded.tasks[0].summary == "real" and loaded.version == A
    missing = str(tmp_path / "evaluation_metrics.json")
    unwritten = ResultDataset(result="evaluation", filepath=missing, version=Version(None, None), optional=True)
    assert unwritten.load() is None
    with pytest.raises(UserError, match="result 'metric' is not one of"):
        ResultDataset(result="metric", filepath=missing)


def test_an_evaluation_keeps_its_tokens_and_reads_as_utf8(tmp_path):
    """Results are not redacted: a fill-mask token or the baseline token named ``token`` is a result, and Chinese
    stays readable in the file."""
    evaluation = Evaluation(HeldOut(loss=3.2, accuracy=0.4, baseline_accuracy=0.1), "的", 0.15, 7,
                            fill_mask_examples=[{"sentence": "北京是中国的[MASK]都。",
                                                 "predictions": [{"token": "首", "score": 0.5}]}])
    path = tmp_path / "evaluation_metrics.json"
    ResultDataset(result="evaluation", filepath=str(path), version=Version(None, A)).save(evaluation)
    text = (path / A / "evaluation_metrics.json").read_text(encoding="utf-8")
    assert '"baseline_token": "的"' in text and '"token": "首"' in text and "***" not in text
    loaded = ResultDataset(result="evaluation", filepath=str(path), version=Version(None, None)).load()
    assert loaded == evaluation and loaded.version == A


def test_a_models_fine_tuning_results_keep_the_newest_of_each_task(tmp_path):
    """A second run on another file adds to the model's results (the card lists both); a run on the same task
    replaces it; another model's results stay apart."""
    from bert_mlm.core.finetune.result import Estimate, TaskResult

    def task(dataset: str, accuracy: float, name: str = "") -> TaskResult:
        return TaskResult(f"accuracy {accuracy}", {"accuracy": Estimate(accuracy, 0.01, seeds=[accuracy])},
                          task=name, dataset=dataset)

    path, model, other = str(tmp_path / "finetune_metrics.json"), "2025-12-01T00.00.00.000Z", "2025-12-02T00.00.00.000Z"
    saved = {A: FinetuneResults((task("评论.csv", 0.8),), model),
             "2026-01-01T12.00.00.000Z": FinetuneResults((task("sst2.tsv", 0.7),), other),
             B: FinetuneResults((task("msra.conll", 0.6), task("评论.csv", 0.85, "sentiment")), model),
             "2026-01-03T00.00.00.000Z": FinetuneResults((task("msra.conll", 0.65),), model)}
    for version, results in saved.items():
        ResultDataset(result="finetune", filepath=path, version=Version(None, version)).save(results)
    loaded = ResultDataset(result="finetune", filepath=path, version=Version(None, None)).load()
    assert [(found.key, found.score.mean, found.run) for found in loaded] == [
        ("msra.conll", 0.65, "2026-01-03T00.00.00.000Z"), ("sentiment", 0.85, B), ("评论.csv", 0.8, A)]
    assert loaded.version == "2026-01-03T00.00.00.000Z" and loaded.model_version == model
    assert FinetuneResults.from_json(loaded.to_json()).tasks == loaded.tasks  # metrics.json keeps them, each its run
    pinned = ResultDataset(result="finetune", filepath=path, version=Version(A, None)).load()
    assert [found.key for found in pinned] == ["评论.csv"]
