"""The notebooks run top to bottom against real pipeline outputs (smoke env), so they cannot rot."""

from __future__ import annotations

import asyncio
import shutil

import nbformat
import pytest
from nbclient import NotebookClient


@pytest.mark.slow
def test_notebooks_execute(smoke_chain_copy, project_root):
    """On the shared smoke chain's outputs, in a copy of its project (the notebooks go in its notebooks/)."""
    shutil.copytree(project_root / "notebooks", smoke_chain_copy / "notebooks")
    paths = [smoke_chain_copy / "notebooks" / name for name in ("corpus_and_tokenizer.ipynb", "fill_mask.ipynb")]
    notebooks = [nbformat.read(path, as_version=4) for path in paths]

    async def execute_side_by_side():  # one kernel each, at once: each spends seconds importing torch
        await asyncio.gather(*(
            NotebookClient(notebook, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).async_execute()
            for path, notebook in zip(paths, notebooks, strict=True)
        ))

    asyncio.run(execute_side_by_side())
    for path, notebook in zip(paths, notebooks, strict=True):
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], path.name
        assert len(outputs) >= 4, path.name
