"""Kedro runs for the tests, in this process: a session as ``kedro run`` makes it, and the
project's command line itself."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import traceback
from pathlib import Path
from unittest import mock

from click.testing import CliRunner
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from omegaconf import OmegaConf

from bert_mlm.cli import run

# The default pipeline's nodes, in the order they run.
DEFAULT_CHAIN_NODES = [
    "clean_and_split_corpus",
    "summarise_corpus",
    "build_tokenizer",
    "encode_corpus",
    "summarise_tokens",
    "build_model_inputs",
    "tune_mask_probability",
    "record_run",
    "train_masked_lm",
    "evaluate_masked_lm",
    "finetune_classifier",
    "gather_metrics",
    "build_run_report",
    "write_model_card",
]


def run_session(project: Path, monkeypatch, env: str = "smoke", pipeline_name: str | list[str] | None = None,
                runner=None, **params):
    """As `kedro run --env ENV --pipelines NAME[,NAME] --params a.b=v,...` does it (``runner``: a
    Kedro runner instance, Kedro's SequentialRunner by default)."""
    monkeypatch.chdir(project)
    bootstrap_project(project)
    runtime = OmegaConf.to_container(OmegaConf.from_dotlist([f"{k}={v}" for k, v in params.items()]))
    names = [pipeline_name] if isinstance(pipeline_name, str) else pipeline_name
    with KedroSession.create(project_path=project, env=env, runtime_params=runtime or None) as session:
        return session.run(pipeline_names=names, runner=runner)


def latest(path: Path) -> Path:
    """The newest version of a versioned dataset: data/.../<name>/<timestamp>/<name>."""
    versions = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    assert versions, f"no version under {path}"
    return versions[-1] / path.name


def kedro_cli(project, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``kedro run --env smoke ARGS`` in ``project`` through the project's run command
    (:data:`bert_mlm.cli.run`, the one ``kedro run`` and ``python -m bert_mlm`` call), in this
    process: a subprocess spends ~6 s importing torch, transformers and Kedro before the first
    check. The result reads as the process's would: its exit status, its output with the log
    lines, and the traceback it would print on stderr.
    tests/reliability/test_user_errors.py runs the real ``python -m bert_mlm`` once."""
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    cwd = os.getcwd()
    with mock.patch.dict(os.environ, {"KEDRO_DISABLE_TELEMETRY": "1", **env}):
        os.chdir(project)
        try:
            bootstrap_project(project)  # configures the project's logging: the handler comes after
            logging.getLogger().addHandler(handler)
            result = CliRunner().invoke(run, ["--env", "smoke", *args])
        finally:
            logging.getLogger().removeHandler(handler)
            os.chdir(cwd)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(
        ["kedro", "run", *args], result.exit_code, log.getvalue() + result.stdout, stderr
    )
