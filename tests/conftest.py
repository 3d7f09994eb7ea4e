"""Shared fixtures: the project root, ../shared data, and an isolated copy of the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bert_mlm.scratch import scratch_project

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BERT_MLM_SHARED", PROJECT_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED / "corpora").is_dir():
        pytest.skip(f"../shared is absent (looked in {SHARED}); set BERT_MLM_SHARED to its path")
    return SHARED


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A scratch copy of the project (its conf/, an empty data/) in a temporary directory.

    Kedro sessions in tests run there, so they never touch (or depend on) the developer's data/.
    """
    return scratch_project(tmp_path, PROJECT_ROOT)


def pytest_configure(config):
    # The tests train tiny models: one thread is faster than two, and CI's two cores are shared
    # with tokenizers' Rust threads. Oversubscribed OpenMP threads slowed steps >10x here.
    import torch

    torch.set_num_threads(1)
