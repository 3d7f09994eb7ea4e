"""Optional MLflow tracking: with BERT_MLM_MLFLOW=1 a real MLflow run holds the parameters
(kedro-mlflow), the metrics, the training curve and the report (our hook); off by default
(tests/test_tracking.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("kedro_mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")

KEDRO = str(Path(sys.executable).with_name("kedro"))
PASSWORD = "Sesame-mlflow-5"
STORAGE = f"postgresql://optuna:{PASSWORD}@db.example/studies"  # not opened: no study runs


def tracked_kedro_run(project: Path) -> subprocess.CompletedProcess:
    """``BERT_MLM_MLFLOW=1 kedro run --env smoke`` as a process of its own: settings read the
    switch when they are imported. The study is not what is tracked here: skipped; the run validates
    every 6 steps."""
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "BERT_MLM_MLFLOW": "1"}
    # A password in a parameter: kedro-mlflow logs every parameter and tags the run with --params.
    command = [KEDRO, "run", "--env", "smoke", "--params",
               f"tuning.n_trials=0,tuning.storage={STORAGE},training.eval_every=6"]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_full_run_is_logged_when_tracking_is_on(smoke_chain_copy):
    # Off by default: tests/test_tracking.py checks that the shared smoke chain (a run in the tests' process,
    # whose settings were imported without BERT_MLM_MLFLOW) wrote nothing to MLflow. This run is in a copy of
    # its project: its data stages are reused.
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
