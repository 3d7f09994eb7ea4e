"""Run `kedro run` in a scratch copy of this project (fresh data/ and tuning study), measuring
wall time, peak memory and the time of every node (the project's NodeTimingHook).

A scratch project can also be made from another checkout of the project (``source``: a git
worktree of an older commit), whose ``src/`` then goes first on ``PYTHONPATH``: the way the
benchmarks run the previous implementation side by side with this one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from _timing import run_measured

from bert_mlm.scratch import scratch_project

ROOT = Path(__file__).resolve().parents[1]


def kedro_run_in(project: Path, arguments: list[str], source: Path = ROOT) -> dict:
    """``kedro run ARGUMENTS`` in ``project``; wall seconds, peak memory and node timings."""
    timings = project / "node_timings.json"
    timings.unlink(missing_ok=True)
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "BERT_MLM_NODE_TIMINGS": str(timings)}
    if source != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(source / "src"), env.get("PYTHONPATH", "")])
    kedro = str(Path(sys.executable).with_name("kedro"))
    measured = run_measured([kedro, "run", *arguments], cwd=str(project), env=env)
    if measured["returncode"] != 0:
        raise RuntimeError(f"kedro run {' '.join(arguments)} failed:\n{measured['stderr_tail']}")
    recorded = json.loads(timings.read_text())
    measured["nodes"], measured["pipeline_seconds"] = recorded["nodes"], recorded["pipeline_seconds"]
    measured["plan"] = recorded.get("plan")
    metrics = sorted((project / "data" / "08_reporting" / "metrics.json").glob("*/metrics.json"))
    measured["metrics"] = json.loads(metrics[-1].read_text()) if metrics else None
    return measured


def kedro_run(arguments: list[str]) -> dict:
    """``kedro run ARGUMENTS`` in a fresh scratch project of this checkout."""
    with tempfile.TemporaryDirectory(prefix="bert-mlm-bench-") as scratch:
        return kedro_run_in(scratch_project(scratch, ROOT), arguments)
