"""Run `kedro run` in a scratch copy of this project (fresh data/ and tuning study), measuring
wall time, peak memory and the time of every node (the project's NodeTimingHook)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from _timing import run_measured

ROOT = Path(__file__).resolve().parents[1]


def scratch_project(parent: str) -> Path:
    project = Path(parent) / "project"
    project.mkdir()
    for name in ("conf", "pyproject.toml", ".telemetry"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("local"))
            (project / name / "local").mkdir(exist_ok=True)
        elif source.exists():
            shutil.copy2(source, project / name)
    (project / "src").mkdir()  # bert_mlm itself is imported from the installed package
    (project / "data").mkdir()
    return project


def kedro_run(arguments: list[str]) -> dict:
    """``kedro run ARGUMENTS`` in a fresh scratch project; wall seconds, peak RSS and node timings."""
    with tempfile.TemporaryDirectory(prefix="bert-mlm-bench-") as scratch:
        project = scratch_project(scratch)
        timings = Path(scratch) / "node_timings.json"
        env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "BERT_MLM_NODE_TIMINGS": str(timings)}
        kedro = str(Path(sys.executable).with_name("kedro"))
        measured = run_measured([kedro, "run", *arguments], cwd=str(project), env=env)
        if measured["returncode"] != 0:
            raise RuntimeError(f"kedro run {' '.join(arguments)} failed:\n{measured['stderr_tail']}")
        measured["nodes"] = json.loads(timings.read_text())["nodes"]
        metrics = sorted((project / "data" / "08_reporting" / "metrics.json").glob("*/metrics.json"))
        measured["metrics"] = json.loads(metrics[-1].read_text()) if metrics else None
        return measured
