"""Logs that read well in files: a real `kedro run` with its output redirected to a file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from bert_mlm.core.common.progress import Progress
from bert_mlm.core.record.results import ModelResults
from bert_mlm.hooks.summary import summary_lines

RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) +[\w.]+: ")


# `kedro run` as the `kedro` script runs it (kedro.framework.cli.main), noting at its exit whether MLflow
# was imported and the commands Kedro's command line lists.
KEDRO = """
import atexit, json, os, sys
from kedro.framework.cli import main
from kedro.framework.cli.cli import KedroCLI

def note():
    imported = "mlflow" in sys.modules
    with open(os.environ["BERT_MLM_TEST_NOTE"], "w") as handle:
        json.dump({"mlflow_imported": imported, "commands": KedroCLI(os.getcwd()).list_commands(None)}, handle)

atexit.register(note)
sys.argv[0] = "kedro"
main()
"""


@pytest.mark.slow
def test_a_run_logged_to_a_file_has_one_plain_line_per_record(project_copy, tmp_path):
    """Also: a run without tracking never imports MLflow. kedro-mlflow is installed here (the test extra): Kedro's
    command line loads every plugin's commands and hooks, and MLflow's import alone warned in every run's log."""
    log, note = project_copy / "run.log", tmp_path / "note.json"
    unset = ("BERT_MLM_LOGS", "KEDRO_LOGGING_CONFIG", "BERT_MLM_MLFLOW")
    with open(log, "w") as handle:  # as `kedro run > run.log 2>&1` does
        completed = subprocess.run(
            [sys.executable, "-c", KEDRO, "run", "--env", "smoke",
             "--params", "training.progress=true,tuning.n_trials=2"],
            cwd=project_copy, stdout=handle, stderr=subprocess.STDOUT, timeout=600,
            env={**{k: v for k, v in os.environ.items() if k not in unset}, "BERT_MLM_TEST_NOTE": str(note)},
        )
    text = log.read_text()
    assert completed.returncode == 0, text[-3000:]
    noted = json.loads(note.read_text())
    assert noted["mlflow_imported"] is False and "run" in noted["commands"]
    if importlib.util.find_spec("kedro_mlflow"):
        assert "mlflow" in noted["commands"]  # kedro-mlflow's commands are there, MLflow is not imported
    lines = text.splitlines()
    assert "\r" not in text
    assert max(map(len, lines)) <= 300
    strays = [line for line in lines if line.strip() and not RECORD.match(line)]
    assert not strays, strays[:5]  # every record on one line: no continuation lines
    progress = [line for line in lines if "bert_mlm.progress: training: step" in line]
    assert len(progress) >= 5 and all(
        re.search(r"loss [\d.]+, lr [\d.e+-]+, tokens/s \(window\) [\d,]+, tokens/s \(since start\) [\d,]+, "
                  r"elapsed .* ETA", p) and "step/s" not in p for p in progress
    )  # one rate, labelled: the window's and the run's tokens/s (no cumulative steps/s beside them)
    trials = [line for line in lines if "bert_mlm.core.study.tuning: tuning: trial" in line]
    assert len(trials) == 2 and re.search(r"1 of 2 trial\(s\) left, ETA \d+:\d\d$", trials[0])
    assert any("bert_mlm.progress: ingestion:" in line for line in lines)
    assert any("optuna" in line and "Trial 1 finished" in line for line in lines)  # Optuna in the same format
    summary = [line for line in lines if "bert_mlm.hooks: " in line]
    assert any("Run summary" in line for line in summary)
    assert any(
        re.search(r"bert_mlm\.hooks:   report +\S*data/08_reporting/run_report\.html/.+/run_report\.html$", line)
        for line in summary
    )
    assert any(
        re.search(r"bert_mlm\.hooks:   model +\S*data/06_models/masked_lm/.+/masked_lm$", line) for line in summary
    )
    assert any("eval loss" in line and "most-frequent-token reference" in line for line in summary)
    auto = "(auto: local at 0.05 up to width 128, at 0.03 up to width 256)"
    assert any(line.endswith(f"; local initialisation at 0.05 {auto}") for line in lines
               if "Training with learning rate" in line)  # where the weights start, auto's choice named

    # The plan first: the stages, their budgets, an estimate measured here, the precision once.
    plan = [line.split("bert_mlm.hooks: ", 1)[1] for line in lines if "bert_mlm.hooks: Plan: " in line]
    assert plan[0] == ("Plan: ingestion -> tokenization -> sequences -> tuning -> training -> finetune -> "
                       "evaluation -> reporting")
    assert "Plan: training: 12 steps of 8 x 64 tokens" in plan
    assert re.fullmatch(r"Plan: steps and forward passes ~\d+:\d\d on this machine now \(tuning \d+:\d\d, "
                        r"training \d+:\d\d, evaluation \d+:\d\d\); a training step measured at [\d.]+ s "
                        r"\(in [\d.]+ s\)",
                        plan[-2])
    assert re.fullmatch(r"Plan: cpu, fp32, 1 torch thread\(s\) \(OMP_NUM_THREADS\), OMP_WAIT_POLICY PASSIVE", plan[-1])
    assert lines.index(next(line for line in lines if "Plan: steps and forward" in line)) < lines.index(
        next(line for line in lines if "Running node: clean_and_split_corpus" in line))
    # One line per fact: the precision once, the evaluation's headline once (in the summary), each
    # node's start once, and none of Kedro's dataset loads and saves or repeated completions.
    assert sum("fp32" in line for line in lines) == 1
    assert sum("most-frequent-token reference" in line for line in lines) == 1
    nodes = 14  # the chain's 11, and the reporting nodes' run record, metrics.json and model card
    assert sum("Running node: " in line for line in lines) == nodes
    assert not [line for line in lines if "Completed node:" in line or "kedro.io.data_catalog" in line]
    assert sum(" kedro." in line for line in lines) <= 2 * nodes + 3
    # kedro-mlflow is installed here (the test extra) but tracking is off: MLflow is not imported.
    assert "mlflow" not in text.lower() and "UserWarning" not in text


def test_progress_lines_at_tenths_with_the_bars_fields(caplog):
    caplog.set_level("INFO", logger="bert_mlm.progress")
    progress = Progress(40, "training", terminal=False, every_seconds=3600)
    for _ in range(40):
        progress.update(1, loss="1.2345")
    assert len(caplog.records) == 10
    assert caplog.records[-1].getMessage().startswith("training: step 40/40 (100%), loss 1.2345, ")
    caplog.clear()
    Progress(40, "x", terminal=False, enabled=False).update(40)
    assert not caplog.records


def test_summary_lines_are_aligned():
    rows = [{"node": "a", "seconds": 1.0, "seconds_with_io": 2.0, "peak_rss_gb": 0.5},
            {"node": "a_longer_name", "seconds": 10.0, "seconds_with_io": 20.0, "peak_rss_gb": 1.5}]
    lines = summary_lines(rows, 33.0, None, {"model": "m/path", "report": "r/path"})
    assert lines[0] == "Run summary: 33.0 s in the pipeline"
    assert len({len(line) for line in lines[1:4]}) == 1  # the table's columns line up
    assert lines[2].endswith("0.50") and lines[3].endswith("1.50")
    assert lines[-2:] == ["  model   m/path", "  report  r/path"]


def test_the_summary_ends_with_a_continued_runs_before_and_after():
    sentences = {"eval_change_summary": "continued pretraining lowered the held-out loss on 评论.csv from 3.91 to 3.12",
                 "extra_eval_change_summary": "continued pretraining raised the held-out loss on a.txt from 3 to 3.1"}
    results = ModelResults.from_json({"eval_loss": 3.12, "eval_accuracy": 0.3, "eval_loss_start": 3.91,
                                      "extra_eval_loss": 3.1, "extra_eval_accuracy": 0.2, **sentences})
    lines = summary_lines([], 1.0, results, {})
    assert lines[-2:] == [f"  {sentences['eval_change_summary']}", f"  {sentences['extra_eval_change_summary']}"]
