"""Tracking where users look: tracking.tensorboard's event files, read back with TensorBoard's own
reader (MLflow left unimported while tracking is off: tests/test_logs.py)."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from tests.kedro_runs import latest, run_session

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator", reason="tensorboard is not installed (the dev extra)")


def scalars(directory, tag: str) -> list:
    accumulator = event_accumulator.EventAccumulator(str(directory), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    return accumulator.Scalars(tag) if tag in accumulator.Tags()["scalars"] else []


@pytest.mark.slow
def test_a_run_writes_tensorboard_curves_while_it_trains(smoke_chain):
    """The shared smoke chain's run (tests/kedro_runs.py: tracking.tensorboard=true, validation every
    5 steps, a fine-tuning task); MLflow, off unless BERT_MLM_MLFLOW=1, wrote nothing beside it."""
    assert [p.name for p in (smoke_chain / "data" / "09_tracking").iterdir()] == ["tensorboard"]
    (run,) = (smoke_chain / "data" / "09_tracking" / "tensorboard").iterdir()  # one folder per run, its version
    history_file = latest(smoke_chain / "data" / "07_model_output" / "training_history.csv")
    history = pd.read_csv(history_file)
    loss = scalars(run, "train/loss")
    assert [event.step for event in loss] == list(range(1, 13))  # the smoke env's 12 steps
    assert [event.value for event in loss] == pytest.approx(history["loss"].tolist(), rel=1e-6)
    # Written while training ran: before the history was saved at the end of the node.
    assert max(event.wall_time for event in loss) <= history_file.stat().st_mtime
    for tag in ("train/learning_rate", "train/tokens_per_second", "train/accuracy"):
        assert len(scalars(run, tag)) == 12, tag
    # The validation curve, live too: a validated step's record is published after its validation.
    validated = history.dropna(subset=["valid_loss"])
    valid = scalars(run, "valid/loss")
    assert [event.step for event in valid] == validated["step"].tolist() == [5, 10, 12]
    assert [event.value for event in valid] == pytest.approx(validated["valid_loss"].tolist(), rel=1e-6)
    assert max(event.wall_time for event in valid) <= history_file.stat().st_mtime
    metrics = json.loads(latest(smoke_chain / "data" / "08_reporting" / "metrics.json").read_text())
    (evaluation,) = scalars(run, "eval/loss")
    assert (evaluation.step, evaluation.value) == (12, pytest.approx(metrics["eval_loss"], rel=1e-6))
    assert len(scalars(run, "tuning/complete_value")) == 2  # the smoke study's trials
    (finetuned,) = scalars(run, "finetune/accuracy")
    assert finetuned.value == pytest.approx(metrics["finetune_accuracy"], rel=1e-6)
    assert scalars(run, "finetune/majority_accuracy") and scalars(run, "finetune/baseline_accuracy")
    (gain,) = scalars(run, "finetune/gain")
    assert gain.value == pytest.approx(metrics["finetune_gain"], rel=1e-6) and scalars(run, "train/loss_scale")
    assert [e.step for e in scalars(run, "finetune/eval_score_by_epoch/pretrained")] == [0, 1, 2]


# Off by default, a whole chain writes nothing to data/09_tracking: tests/pipelines/test_session_runs.py,
# test_continued_pretraining_of_a_checkpoint_takes_its_tokenizer.


def test_tensorboard_asked_for_but_not_installed_is_one_line_before_any_work(project_copy, monkeypatch):
    from bert_mlm.errors import UserError

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    with pytest.raises(UserError, match=r"tracking.tensorboard: needs the tensorboard package: pip install"):
        run_session(project_copy, monkeypatch, **{"tracking.tensorboard": True})
    assert not (project_copy / "data" / "02_intermediate" / "corpus_documents").exists()  # nothing ran


def test_an_unwritable_tensorboard_folder_is_one_line_before_any_work(project_copy, monkeypatch):
    """A tensorboard_dir the run cannot write gave a 92-line traceback."""
    from tests.kedro_runs import kedro_cli

    blocked = project_copy / "blocked"
    blocked.write_text("a file where the folder would be")  # no folder can be made under it, root or not
    result = kedro_cli(project_copy, "--params", f"tracking.tensorboard=true,tracking.tensorboard_dir={blocked}/tb")
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: tracking.tensorboard_dir: cannot write event files in '{blocked}/tb/"), last
    assert not (project_copy / "data" / "02_intermediate" / "corpus_documents").exists()


def test_mlflow_asked_for_but_not_installed_is_one_line_before_any_work(project_copy, monkeypatch):
    """BERT_MLM_MLFLOW=1 without kedro-mlflow tracked nothing and said nothing."""
    import importlib.util

    from bert_mlm.errors import UserError
    from bert_mlm.hooks.mlflow import MlflowTrackingHook

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "kedro_mlflow" else real(name, *a))
    monkeypatch.setenv("BERT_MLM_MLFLOW", "1")
    with pytest.raises(UserError, match=r'BERT_MLM_MLFLOW=1: MLflow tracking needs kedro-mlflow: pip install -e "\.\['
                                        r'mlflow\]"'):
        MlflowTrackingHook().after_catalog_created(None, {}, "v", {})
