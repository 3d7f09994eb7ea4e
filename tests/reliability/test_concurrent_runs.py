"""Case 3 of the reliability pass: two runs in one project would load each other's dataset
versions; the second one is refused at once, naming the first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bert_mlm import run_lock
from bert_mlm.errors import UserError
from tests.kedro_runs import run_session
from tests.reliability.conftest import mounted_tmpfs

HOLD = """
import sys, time
from bert_mlm import run_lock
run_lock.acquire(sys.argv[1])
print("holding", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_second_run_in_the_same_project_is_refused_and_runs_again_once_the_first_ends(project_copy, monkeypatch,
                                                                                        tmp_path):
    corpus = tmp_path / "corpus.txt"  # small: the lock is the subject (the built-in corpus parses 40 modules)
    corpus.write_text("\n\n".join(f"Paragraph {i} holds a few words of plain text." for i in range(400)))
    book = {"corpus.path": str(corpus)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(project_copy)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(UserError, match=rf"another kedro run is using this project \(pid {holder.pid}, started .*"
                                            r"Wait for it to finish, or run the second one from a copy of the project"):
            run_session(project_copy, monkeypatch, pipeline_name="ingestion", **book)
        assert not (project_copy / "data" / "02_intermediate").exists()  # refused before any node ran
    finally:
        holder.kill()  # as a kill -9: the kernel drops the lock with the process
        holder.wait(timeout=30)
    run_session(project_copy, monkeypatch, pipeline_name="ingestion", **book)
    # The run released the lock at its end, and a failing run does too: this process runs again.
    with pytest.raises(Exception, match="corpus"):
        run_session(project_copy, monkeypatch, pipeline_name="ingestion", **{"corpus.path": "/no/such/corpus"})
    run_session(project_copy, monkeypatch, pipeline_name="ingestion", **book)
    assert len(list((project_copy / "data" / "02_intermediate" / "corpus_documents").iterdir())) == 2


def test_the_lock_is_per_project(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    run_lock.acquire(first)
    try:
        run_lock.acquire(second)
        run_lock.release(second)
    finally:
        run_lock.release(first)


def test_the_run_lock_imports_without_fcntl_and_nothing_else_needs_it():
    """run_lock imported fcntl at import time, so settings.py (through the hooks) could not load on Windows; it is
    on filelock now. Here fcntl is made unimportable, as on Windows, and no module of the package imports it."""
    from pathlib import Path

    code = "import sys; sys.modules['fcntl'] = None\nimport bert_mlm.run_lock\nprint('imported')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip().endswith("imported"), result.stderr[-2000:]
    source = Path(run_lock.__file__).parent
    assert [p for p in source.rglob("*.py") if "import fcntl" in p.read_text()] == []


def test_a_read_only_project_folder_is_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with mounted_tmpfs(data, "size=1m,ro"), pytest.raises(
            UserError, match=rf"^data: cannot take the run lock '{data}/\.bert-mlm-run\.lock' "
                             r"\(Read-only file system\); a run writes its outputs under data/"):
        run_lock.acquire(tmp_path)


def test_a_forked_child_leaves_its_parents_lock_alone(tmp_path):
    """A forked worker (a data loader, an engine's process) that exits through the release path must not remove or
    unlock the lock of the run that forked it: a second run would then start beside the first."""
    import os

    lock = run_lock.acquire(tmp_path)
    try:
        child = os.fork()
        if child == 0:  # the child: what an exit without the hooks runs
            run_lock._release_all()
            os._exit(0)
        os.waitpid(child, 0)
        assert lock.exists() and run_lock.holder_path(tmp_path).exists()
        contender = subprocess.run([sys.executable, "-c", "import sys; from bert_mlm import run_lock\n"
                                    "try:\n    run_lock.acquire(sys.argv[1])\nexcept ValueError as e:\n    print(e)",
                                    str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert contender.stdout.startswith(f"another kedro run is using this project (pid {os.getpid()}, started ")
    finally:
        run_lock.release(tmp_path)
