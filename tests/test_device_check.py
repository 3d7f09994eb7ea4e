"""scripts/device_check.py, the one-call device check of #26, dry-run on the CPU: every system of
the table (the project eager and compiled, the HF Trainer eager and compiled) trains, the table
comes out, and `kedro run --env gpu` goes end to end on the small English and Chinese corpus (its
command run in this process here: tests/kedro_runs.py's kedro_cli)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.kedro_runs import kedro_cli

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.py"


@pytest.fixture
def device_check(monkeypatch):
    """The script as a module, in this process (running it as a process imports torch again, ~6 s),
    and so its `python -m kedro run --env gpu ...` command: the project's run command, as kedro_cli
    runs it (test_logs.py runs the real `kedro run`)."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts bench/ and scripts/ first
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run_in_this_process(command, cwd, env, **_) -> subprocess.CompletedProcess:
        assert command[1:6] == ["-m", "kedro", "run", "--env", "gpu"], command
        return kedro_cli(Path(cwd), *command[6:], kedro_env="gpu", KEDRO_DISABLE_TELEMETRY="1")

    monkeypatch.setattr(module, "subprocess", SimpleNamespace(run=run_in_this_process))
    return module


@pytest.mark.slow
def test_the_cpu_dry_run_prints_the_table_and_runs_kedro_with_the_gpu_environment(device_check, capsys):
    pytest.importorskip("accelerate")  # the HF Trainer's side
    device_check.main(["--device", "cpu", "--tiny"])  # a failed step raises (SystemExit for the kedro run)
    done = capsys.readouterr()
    rows = [json.loads(line) for line in done.out.splitlines() if line.startswith('{"batch"')]
    assert [row["system"] for row in rows] == ["project", "project-compiled", "hf", "hf-compiled"]
    assert all(row["tokens_per_second"] > 0 and row["mfu"] > 0 for row in rows)
    table = [line for line in done.out.splitlines() if re.match(r"\| 8 \| ", line)]
    assert len(table) == 4 and "| 1.00x |" in table[2]  # HF eager is the reference
    finished = next(line for line in done.out.splitlines() if line.startswith("kedro run --env gpu: finished"))
    assert '"eval_masked_tokens"' in finished and '"eval_loss_se"' in finished


def test_a_bad_argument_is_refused_in_one_line_before_any_training(device_check, capsys):
    with pytest.raises(SystemExit) as refused:
        device_check.main(["--device", "cpu", "--tiny", "--systems", "project,deepspeed"])
    assert refused.value.code == 2
    done = capsys.readouterr()
    assert "--systems: deepspeed not among project, project-compiled, hf, hf-compiled" in done.err
    assert '{"batch"' not in done.out
    with pytest.raises(SystemExit):
        device_check.main(["--device", "cpu", "--tiny", "--steps", "3", "--skip", "3"])
    assert "--skip: 3 must be between 1 and --steps - 1 (2)" in capsys.readouterr().err
