"""The data every training comparison shares: a corpus cleaned, split, tokenized and packed once,
with this project's core functions, so that both systems see the very same sequences."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from transformers import PreTrainedTokenizerBase

from bert_mlm.config import (
    CorpusConfig,
    EvaluationConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TokenizerConfig,
    TrainingConfig,
)
from bert_mlm.core.data.corpus import clean_documents
from bert_mlm.core.data.sources import read_corpus
from bert_mlm.core.tokens.sequences import build_sequences
from bert_mlm.core.tokens.tokenizer import encode_documents, train_wordpiece
from bert_mlm.core.train.experiment import Experiment


@dataclass
class Prepared:
    texts: dict[str, list[str]]
    tokenizer: PreTrainedTokenizerBase
    token_ids: dict[str, list[np.ndarray]]
    sequences: dict[str, list[np.ndarray]]
    max_length: int

    @property
    def train_megabytes(self) -> float:
        return sum(len(t.encode()) for t in self.texts["train"]) / 1e6


def prepare(corpus: str, extra: str | None = None, max_length: int = 128, vocab_size: int = 8192) -> Prepared:
    documents, _ = clean_documents(read_corpus(corpus), ratios=CorpusConfig().split_ratios)
    texts = {s: documents.loc[documents["split"] == s, "text"].tolist() for s in ("train", "valid", "test")}
    tokenizer = train_wordpiece(texts["train"], TokenizerConfig(vocab_size=vocab_size, base_alphabet="none"))
    token_ids = {s: encode_documents(tokenizer, t) for s, t in texts.items()}
    if extra:
        extra_documents, _ = clean_documents(read_corpus(extra), min_words=1, deduplicate=False)
        texts["extra"] = extra_documents["text"].tolist()
        token_ids["extra"] = encode_documents(tokenizer, texts["extra"])
    sequences = {
        s: build_sequences(ids, "packed", max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        for s, ids in token_ids.items()
    }
    return Prepared(texts, tokenizer, token_ids, sequences, max_length)


def experiment(
    prepared: Prepared, layers: int, hidden: int, steps: int, batch_size: int = 32, **training
) -> Experiment:
    """This project's defaults for everything but the model size and the budget (no dropout, as
    in conf/base)."""
    return Experiment(
        tokenizer=prepared.tokenizer,
        sequences=prepared.sequences,
        model_config=ModelConfig(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=max(1, hidden // 64),
            intermediate_size=4 * hidden,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        # record_every=1: the benchmarks time steps one by one (and skip the first few), and on the
        # CPU reading the loss every step costs nothing measurable.
        training=TrainingConfig(
            **{
                "max_steps": steps,
                "batch_size": batch_size,
                "warmup_steps": max(1, steps // 10),
                "progress": False,
                "record_every": 1,
                **training,
            }
        ),
        masking=MaskingConfig(),
        evaluation=EvaluationConfig(mask_draws=1),
        sequence_config=SequenceConfig(max_length=prepared.max_length),
    )
