"""The fine-tuning tests' MSRA: the first sentences of the real file, written once per worker."""

from __future__ import annotations

from pathlib import Path

import pytest

MSRA_HEAD_SENTENCES = 4000


@pytest.fixture(scope="session")
def msra_head(shared_dir, tmp_path_factory) -> Path:
    """The first 4,000 sentences of MSRA's ``ner_train.conll`` (of 46,000: ~1.1 MB of 12.7 MB), for the tests
    whose subject is a tagger or the entity scores, not reading the whole file (each whole read cost ~3 s;
    ``test_tagged.py`` reads it whole once)."""
    with (shared_dir / "corpora/msra-ner/ner_train.conll").open("rb") as whole:
        text = whole.read(2 << 20).decode("utf-8", "ignore")
    sentences = text.split("\n\n")[:MSRA_HEAD_SENTENCES]
    assert len(sentences) == MSRA_HEAD_SENTENCES  # 2 MB hold them, the last one whole
    path = tmp_path_factory.mktemp("msra") / "ner_train_head.conll"
    path.write_text("\n\n".join(sentences) + "\n", encoding="utf-8")
    return path
