"""Atomic writes: what a killed writer leaves behind is removed by the next run, and only that."""

from __future__ import annotations

import os
import subprocess
import sys

from bert_mlm.core.common.files import remove_dead_temporaries


def test_only_the_temporaries_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    version = tmp_path / "token_store" / "2026-12-04T19.00.00.000Z"
    (version / f".token_store.tmp-{dead}").mkdir(parents=True)
    (version / f".token_store.tmp-{dead}" / "train.bin").write_bytes(b"\0" * 1000)
    plain = tmp_path / "checkpoints"
    plain.mkdir()
    (plain / f".checkpoint-5.tmp-{dead}").write_bytes(b"half")
    mine = tmp_path / "metrics" / "2026-12-04T19.00.01.000Z"
    mine.mkdir(parents=True)
    (mine / f".metrics.json.tmp-{os.getpid()}").write_text("{}")  # a live writer's: kept
    (tmp_path / "notes.tmp-1").write_text("not a temporary of ours")

    removed = remove_dead_temporaries(tmp_path)

    assert sorted(p.name for p in removed) == [f".checkpoint-5.tmp-{dead}", f".token_store.tmp-{dead}"]
    assert not version.exists()  # the version folder it emptied
    assert plain.is_dir()  # not a version folder: kept, even empty
    assert (mine / f".metrics.json.tmp-{os.getpid()}").exists()
    assert (tmp_path / "notes.tmp-1").exists()
