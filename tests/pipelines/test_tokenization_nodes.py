"""The tokenization nodes: tokenizer training shows its progress (it showed none for minutes on a
large corpus: two passes over the train split, then the trainer's own work)."""

from __future__ import annotations

import logging
import re

from bert_mlm.core.model.bert import ModelConfig
from bert_mlm.core.tokens.tokenizer import TokenizerConfig
from bert_mlm.pipelines.tokenization.nodes import build_tokenizer
from tests.core.data.test_documents import mixed_corpus, write_shards


def test_tokenizer_training_reports_each_pass_over_the_text(tmp_path, caplog):
    shards, _ = write_shards(mixed_corpus(tmp_path / "corpus"), tmp_path / "documents")
    with caplog.at_level(logging.INFO, logger="bert_mlm"):
        job, coverage = build_tokenizer(shards, TokenizerConfig(vocab_size=300, base_alphabet="none"), ModelConfig())
        tokenizer = job.build()  # what the tokenizer dataset runs when it saves
    assert len(tokenizer) >= 300 and coverage == {}  # nothing inherited, nothing measured
    lines = [m for m in caplog.messages if m.startswith("tokenizer training")]
    for number, what in ((1, "alphabet"), (2, "vocabulary")):
        finished = [line for line in lines if line.startswith(f"tokenizer training: {what} (pass {number} of 2): ")]
        assert finished, lines
        assert re.search(r": [\d.]+/[\d.]+ M chars \(100%\), [\d.]+ M chars/s, elapsed", finished[-1]), lines
    assert lines[-1] == "tokenizer training: text read; computing the vocabulary (no progress from the trainer)"


def test_the_recipe_names_what_changes_a_trained_vocabulary_and_not_the_unk_warning(tmp_path):
    """Data-stage reuse (core/data/reuse.py) compares recipes: a new [UNK] warning threshold, which only an
    inherited vocabulary is measured against, must not train the vocabulary again; its size must."""
    shards, _ = write_shards(mixed_corpus(tmp_path / "corpus"), tmp_path / "documents")

    def recipe(**values) -> dict:
        return build_tokenizer(shards, TokenizerConfig(**{"vocab_size": 300, **values}), ModelConfig())[0].recipe()

    assert recipe() == recipe(unk_warning_rate=0.5)
    assert recipe() != recipe(vocab_size=301)
    assert "extend_vocabulary" in recipe()["tokenizer"]
