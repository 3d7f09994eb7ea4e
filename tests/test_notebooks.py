"""The notebooks run top to bottom against real pipeline outputs (smoke env), so they cannot rot."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from tests.pipelines.test_session_runs import run_session


@pytest.mark.slow
def test_notebooks_execute(project_copy, project_root, monkeypatch):
    run_session(project_copy, monkeypatch, **{"tuning.n_trials": 0})
    shutil.copytree(project_root / "notebooks", project_copy / "notebooks")
    for name in ("corpus_and_tokenizer.ipynb", "fill_mask.ipynb"):
        path = project_copy / "notebooks" / name
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], name
        assert len(outputs) >= 4, name
