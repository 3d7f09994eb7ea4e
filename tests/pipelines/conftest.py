"""Fixtures of the pipelines' tests: Chinese data and a small checkpoint to continue."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest


@pytest.fixture
def reviews(shared_data, tmp_path) -> Path:
    """A random quarter of ChnSentiCorp's hotel reviews (both labels; the same file name): the tests that read it
    are about the path through the chain, not volume, and a quarter of the text is a quarter of its cost."""
    path = tmp_path / "reviews" / "ChnSentiCorp_htl_all.csv"
    path.parent.mkdir()
    everything = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / path.name)
    everything.sample(2000, random_state=0).to_csv(path, index=False)
    return path


@pytest.fixture
def tiny_chinese_bert(shared_data, tmp_path) -> Path:
    """A small BERT with the bert-base-chinese vocabulary, saved as a checkpoint directory."""
    from transformers import BertConfig, BertForMaskedLM

    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(shared_data / "vocab" / "bert-base-chinese.vocab.txt")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id)
    directory = tmp_path / "tiny-chinese-bert"
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
