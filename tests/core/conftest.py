"""Shared fixtures for the unit tests of ``bert_mlm.core``.

Real data lives read-only at ``../shared`` (relative to the repository root); tests that need it
take the ``shared_dir`` fixture, which skips them with a clear message when it is absent. The data
is only ever read from there, never copied into the repository.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.tokens.tokenizer import train_wordpiece

REPO_ROOT = Path(__file__).resolve().parents[2]
# ``../shared`` relative to the repository root; BERT_MLM_SHARED overrides it (as in tests/conftest.py).
SHARED_DIR = Path(os.environ.get("BERT_MLM_SHARED", REPO_ROOT.parent / "shared"))

_WORDS = (
    "the a an of to in on for with from by function module value list string number object "
    "return returns new copy data file path name class method argument result error type key "
    "item element index dictionary set tuple integer float text line character byte buffer "
    "stream reader writer parser token sequence model training evaluation is are was be can "
    "may must should will not and or if else when while each every this that which"
).split()


def synthetic_sentences(count: int = 2000, seed: int = 0) -> list[str]:
    """Deterministic English-like sentences (no shared data needed)."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 16))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ","]))
    return sentences


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only shared data directory, ``<repo root>/../shared``; skips the test when absent."""
    if not (SHARED_DIR / "corpora").is_dir() or not (SHARED_DIR / "vocab").is_dir():
        pytest.skip(
            f"shared test data not found at {SHARED_DIR} (expected ../shared relative to the "
            "repository root, with corpora/ and vocab/); these tests need the real corpora and "
            "vocabularies"
        )
    return SHARED_DIR


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A small WordPiece tokenizer trained on synthetic text (fast, no shared data)."""
    return train_wordpiece(synthetic_sentences(), TokenizerConfig(vocab_size=300, min_frequency=2,
                                                                  base_alphabet="none"))
