"""The notebooks run top to bottom against real pipeline outputs (smoke env), so they cannot rot."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

# Between two notebooks in one kernel: a fresh namespace, and kedro.ipython no longer counted as loaded, so that
# the next notebook's `%load_ext kedro.ipython` loads the project again (its catalog, context and session).
FRESH_NAMESPACE = 'get_ipython().extension_manager.loaded.discard("kedro.ipython")\n%reset -f'


@pytest.mark.slow
def test_notebooks_execute(smoke_chain_copy, project_root):
    """On the shared smoke chain's outputs, in a copy of its project (the notebooks go in its notebooks/). One
    kernel runs them one after the other, each from its first cell in a fresh namespace: a kernel each spent
    seconds of CPU importing torch, transformers and Kedro again; only the imported modules are shared."""
    shutil.copytree(project_root / "notebooks", smoke_chain_copy / "notebooks")
    paths = [smoke_chain_copy / "notebooks" / name for name in ("corpus_and_tokenizer.ipynb", "fill_mask.ipynb")]
    notebooks = [nbformat.read(path, as_version=4) for path in paths]
    client = NotebookClient(notebooks[0], timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(paths[0].parent)}})
    with client.setup_kernel():
        for number, notebook in enumerate(notebooks):
            if number:
                client.execute_cell(nbformat.v4.new_code_cell(FRESH_NAMESPACE), 0)
            client.nb = notebook
            for index, cell in enumerate(notebook.cells):
                client.execute_cell(cell, index, execution_count=index + 1)
    for path, notebook in zip(paths, notebooks, strict=True):
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], path.name
        assert len(outputs) >= 4, path.name
