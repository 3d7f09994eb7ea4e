"""The project's own lint rules (pyproject.toml's [tool.ruff]: pyflakes, pycodestyle with its
120-character lines, import order, pyupgrade, bugbear) hold over the code and the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "src", "tests", "bench", "scripts"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "All checks passed" in result.stdout
