"""Optional MLflow tracking: with BERT_MLM_MLFLOW=1 a real MLflow run holds the parameters
(kedro-mlflow), the metrics, the training curve and the report (our hook); off by default
(tests/pipelines/test_session_runs.py: a whole chain writes nothing to data/09_tracking)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kedro.framework.project import configure_project

from bert_mlm.hooks.mlflow import MLFLOW_COMMANDS, MLFLOW_HOOK
from tests.kedro_runs import kedro_cli

pytest.importorskip("kedro_mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")

PASSWORD = "Sesame-mlflow-5"
STORAGE = f"postgresql://optuna:{PASSWORD}@db.example/studies"  # not opened: no study runs


@pytest.fixture
def settings_imported_with_mlflow_on(monkeypatch):
    """The project's settings read ``BERT_MLM_MLFLOW`` when they are imported: imported again by the next run
    (kedro_cli, with the switch on), with kedro-mlflow's own modules where a run with tracking off left
    stand-ins (bert_mlm.hooks.mlflow.keep_mlflow_unimported). Afterwards, the modules as they were, and Kedro's
    settings configured from them again: a later test's session in this process tracks nothing."""
    with monkeypatch.context() as patched:
        patched.delitem(sys.modules, "bert_mlm.settings")
        for name in (MLFLOW_COMMANDS, MLFLOW_HOOK):
            if getattr(sys.modules.get(name), "__standing_in__", False):
                patched.delitem(sys.modules, name)
        yield
    if "mlflow" in sys.modules:  # a run a failed test left open must not collect a later session's files
        sys.modules["mlflow"].end_run()
    configure_project("bert_mlm")


def tracked_kedro_run(project: Path):
    """``BERT_MLM_MLFLOW=1 kedro run --env smoke`` through the project's run command, in this process (a process
    of its own spent ~7 s importing torch, transformers, Kedro and MLflow, which this test imports anyway). The
    study is not what is tracked here: skipped; the run validates every 6 steps."""
    # A password in a parameter: kedro-mlflow logs every parameter and tags the run with --params.
    return kedro_cli(project, "--params", f"tuning.n_trials=0,tuning.storage={STORAGE},training.eval_every=6",
                     BERT_MLM_MLFLOW="1")


@pytest.mark.slow
def test_a_full_run_is_logged_when_tracking_is_on(smoke_chain_copy, settings_imported_with_mlflow_on):
    # Off by default: tests/pipelines/test_session_runs.py checks that a whole chain (a run in the tests' process,
    # whose settings were imported without BERT_MLM_MLFLOW) wrote nothing to MLflow. This run is in a copy of
    # the shared chain's project: its data stages are reused.
    tracked = tracked_kedro_run(smoke_chain_copy)
    assert tracked.returncode == 0, tracked.stderr[-3000:]
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{smoke_chain_copy / 'data' / '09_tracking' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("bert-mlm")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert float(run.data.params["masking.probability"]) == pytest.approx(0.15)  # kedro-mlflow, flattened
    assert run.data.params["training.max_steps"] == "12"  # the smoke env's value
    metrics = run.data.metrics
    assert 0 < metrics["eval_accuracy"] <= 1 and metrics["eval_masked_tokens"] > 0 and metrics["train_tokens"] > 0
    loss_curve = client.get_metric_history(run.info.run_id, "train_loss")
    assert [m.step for m in loss_curve] == list(range(1, 13))
    assert [m.step for m in client.get_metric_history(run.info.run_id, "valid_loss")] == [6, 12]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"run_report.html", "metrics.json"} <= artifacts
    assert run.data.params["tuning.storage"] == "postgresql://optuna:***@db.example/studies"
    assert "optuna:***@db.example" in run.data.tags["runtime_params"]
    for path in (smoke_chain_copy / "data").rglob("*"):  # the tracking database and artifacts among them
        assert not path.is_file() or PASSWORD.encode() not in path.read_bytes(), path
