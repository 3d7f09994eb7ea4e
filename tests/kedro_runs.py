"""Kedro runs for the tests, in this process: a session as ``kedro run`` makes it, the project's
command line itself, and the suite's one shared smoke chain (:func:`shared_smoke_chain`)."""

from __future__ import annotations

import concurrent.futures
import io
import logging
import os
import shutil
import subprocess
import traceback
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from filelock import FileLock
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from omegaconf import OmegaConf

from bert_mlm.cli import run
from bert_mlm.scratch import scratch_project

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


def on_a_short_stack(function, *args, **kwargs):
    """``function(*args, **kwargs)`` run in a thread of its own, its result returned (its exception raised) here.

    Kedro's settings loader (dynaconf) calls ``inspect.stack()``, source lines and all, at every
    ``bootstrap_project``: under pytest's ~60 frames that was half the CPU of an in-process ``kedro run``
    that stops at a user error (0.27 s a call, 0.12 s from a new thread's short stack). Not for a run that
    starts data-parallel workers: torchelastic installs its signal handlers on the main thread only. A
    run that hangs is not joined: pytest-timeout's error reaches the test, the thread is left behind."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(function, *args, **kwargs).result()
    finally:
        pool.shutdown(wait=False)


def run_session(project: Path, monkeypatch, env: str = "smoke", pipeline_name: str | list[str] | None = None,
                runner=None, main_thread: bool = False, **params):
    """As `kedro run --env ENV --pipelines NAME[,NAME] --params a.b=v,...` does it (``runner``: a
    Kedro runner instance, Kedro's SequentialRunner by default), on a short stack (``main_thread``: on
    this thread, for data-parallel workers)."""
    if main_thread:
        return _run_session(project, monkeypatch, env, pipeline_name, runner, **params)
    return on_a_short_stack(_run_session, project, monkeypatch, env, pipeline_name, runner, **params)


def _run_session(project: Path, monkeypatch, env, pipeline_name, runner, **params):
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


def kedro_cli(project, *args: str, kedro_env: str = "smoke", **env: str) -> subprocess.CompletedProcess:
    """``kedro run --env KEDRO_ENV ARGS`` in ``project`` through the project's run command
    (:data:`bert_mlm.cli.run`, the one ``kedro run`` and ``python -m bert_mlm`` call), in this
    process, with ``env`` added to the environment: a subprocess spends ~6 s importing torch,
    transformers and Kedro before the first check. The result reads as the process's would: its
    exit status, its output with the log lines, and the traceback it would print on stderr.
    tests/reliability/test_user_errors.py runs the real ``python -m bert_mlm`` once, test_logs.py
    the real ``kedro run``."""
    return on_a_short_stack(_kedro_cli, project, *args, kedro_env=kedro_env, **env)


def _kedro_cli(project, *args: str, kedro_env: str = "smoke", **env: str) -> subprocess.CompletedProcess:
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    cwd = os.getcwd()
    with mock.patch.dict(os.environ, {"KEDRO_DISABLE_TELEMETRY": "1", **env}):
        os.chdir(project)
        try:
            bootstrap_project(project)  # configures the project's logging: the handler comes after
            logging.getLogger().addHandler(handler)
            result = CliRunner().invoke(run, ["--env", kedro_env, *args])
        finally:
            logging.getLogger().removeHandler(handler)
            os.chdir(cwd)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(
        ["kedro", "run", *args], result.exit_code, log.getvalue() + result.stdout, stderr
    )


def write_labelled_task(path: Path) -> Path:
    """A small labelled CSV at ``path``: whether a sentence says it failed (English words of the built-in corpus)."""
    rng = np.random.default_rng(0)
    words = "the value of a list is returned by this function when the object has a name".split()
    rows = []
    for i in range(200):
        sentence = " ".join(rng.choice(words, size=8))
        rows.append(
            {"label": ["passed", "failed"][i % 2], "text": sentence + (" raises an error" if i % 2 else " works")}
        )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def finetune_params(path: Path, **extra) -> dict:
    return {"finetune.train_path": str(path), "finetune.max_train_examples": 120, "finetune.max_eval_examples": 60,
            "finetune.seeds": 2, "finetune.epochs": 2, "finetune.max_length": 32, "finetune.progress": False, **extra}


def smoke_chain_params(task: Path) -> dict:
    """The shared chain's ``--params``: the default chain with a labelled task, the study tuning the mask rate by
    fine-tuning, validation every 5 steps and TensorBoard's event files (what the tests that read it check)."""
    return finetune_params(task, **{"tuning.objective": "finetune", "training.eval_every": 5,
                                    "tracking.tensorboard": True})


def shared_smoke_chain(base: Path, project_root: Path) -> Path:
    """The project of one smoke chain run (:func:`smoke_chain_params`) under ``base``, made by the first test
    that asks for it and read by the others: xdist's workers share ``base`` and take turns under a file lock.
    A whole Kedro session costs seconds; the tests that only read a chain's outputs need not pay it each."""
    folder = base / "smoke-chain"
    with FileLock(f"{folder}.lock"):
        if (folder / "failed").exists():  # once is enough: every test that reads it fails with the first error
            pytest.fail(f"the shared smoke chain failed: {(folder / 'failed').read_text()}")
        if not (folder / "done").exists():
            folder.mkdir()
            project = scratch_project(folder, project_root)
            try:
                with pytest.MonkeyPatch.context() as monkeypatch:
                    run_session(project, monkeypatch, **smoke_chain_params(write_labelled_task(folder / "task.csv")))
            except Exception as error:
                (folder / "failed").write_text(f"{type(error).__name__}: {error}")
                raise
            (folder / "done").touch()
    return folder / "project"


def copy_project(project: Path, parent: Path) -> Path:
    """``<parent>/project``: a copy of ``project`` with its data, for a test that runs more on it."""
    return Path(shutil.copytree(project, parent / "project", symlinks=True))
