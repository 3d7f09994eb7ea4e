"""A scratch copy of a bert-mlm project, for running Kedro on fresh data away from the real one.

The copy holds ``conf/`` (without ``conf/local``, which holds one developer's settings and
credentials), ``pyproject.toml`` and ``.telemetry`` when present, an empty ``data/`` and an empty
``src/``: ``bert_mlm`` itself is imported from the installed package (or ``PYTHONPATH``). The
tests, the benchmarks and the docs' screenshot script all run Kedro in such copies.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def scratch_project(parent: str | Path, source: str | Path) -> Path:
    """``<parent>/project``: a scratch copy of the project at ``source``."""
    source, project = Path(source), Path(parent) / "project"
    project.mkdir()
    for name in ("conf", "pyproject.toml", ".telemetry"):
        origin = source / name
        if origin.is_dir():
            shutil.copytree(origin, project / name, ignore=shutil.ignore_patterns("local"))
            (project / name / "local").mkdir(exist_ok=True)
        elif origin.exists():
            shutil.copy2(origin, project / name)
    (project / "src").mkdir()
    (project / "data").mkdir()
    return project
