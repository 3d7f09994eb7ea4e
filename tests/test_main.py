"""`bert-mlm`: one command line for the project's commands (run, fill-mask, params)."""

from __future__ import annotations

import os
import subprocess
import sys

from bert_mlm.config import SECTIONS


def bert_mlm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bert_mlm", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"})


def test_help_lists_the_commands():
    result = bert_mlm("--help")
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1]
    assert [line.split()[0] for line in commands.splitlines() if line.startswith("  ") and line.split()
            and not line.startswith("     ")] == ["run", "fill-mask", "params"]


def test_params_lists_every_section():
    result = bert_mlm("params")
    assert result.returncode == 0, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines() if line and not line.startswith(" ")] == [
        *SECTIONS, "<variant>.overrides"]  # every mask-rate variant's, not one variant's as if it were a section


def test_an_unknown_command_is_named():
    result = bert_mlm("paramz")
    assert result.returncode == 2 and "No such command 'paramz'" in result.stderr
