"""scripts/device_check.py, the one-call device check of #26, dry-run on the CPU: every system of
the table (the project eager and compiled, the HF Trainer eager and compiled) trains, the table
comes out, and `kedro run --env gpu` goes end to end on the small English and Chinese corpus."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.py"


def run_script(*arguments: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_cpu_dry_run_prints_the_table_and_runs_kedro_with_the_gpu_environment():
    pytest.importorskip("accelerate")  # the HF Trainer's side
    done = run_script("--device", "cpu", "--tiny")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"batch"')]
    assert [row["system"] for row in rows] == ["project", "project-compiled", "hf", "hf-compiled"]
    assert all(row["tokens_per_second"] > 0 and row["mfu"] > 0 for row in rows)
    table = [line for line in done.stdout.splitlines() if re.match(r"\| 8 \| ", line)]
    assert len(table) == 4 and "| 1.00x |" in table[2]  # HF eager is the reference
    finished = next(line for line in done.stdout.splitlines() if line.startswith("kedro run --env gpu: finished"))
    assert '"eval_masked_tokens"' in finished and '"eval_loss_se"' in finished


def test_a_bad_argument_is_refused_in_one_line_before_any_training():
    done = run_script("--device", "cpu", "--tiny", "--systems", "project,deepspeed")
    assert done.returncode == 2
    assert "--systems: deepspeed not among project, project-compiled, hf, hf-compiled" in done.stderr
    assert '{"batch"' not in done.stdout
