"""The config package is the ground floor: importing it loads no torch, transformers or optuna,
so that checking a configuration (the hook, `bert-mlm params`) costs no second of imports."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "optuna")


def test_importing_the_config_package_loads_no_heavy_library():
    code = ("import json, sys; import bert_mlm.config, bert_mlm.config.describe; "
            f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout) == []


def test_the_params_command_loads_no_heavy_library():
    code = ("import json, sys; from click.testing import CliRunner; from bert_mlm.__main__ import bert_mlm; "
            "result = CliRunner().invoke(bert_mlm, ['params']); assert result.exit_code == 0, result.output; "
            f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout.splitlines()[-1]) == []
