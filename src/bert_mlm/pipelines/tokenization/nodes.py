"""Nodes of the ``tokenization`` pipeline: a WordPiece tokenizer and the corpus as token ids."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.core.params import build_config
from bert_mlm.core.tokenizer import TokenizerConfig, encode_documents, load_tokenizer, train_wordpiece

logger = logging.getLogger(__name__)


def build_tokenizer(corpus_documents: pd.DataFrame, tokenizer_params: dict) -> PreTrainedTokenizerFast:
    """Train a WordPiece vocabulary on the train split, or load ``tokenizer.vocab_path``."""
    config = build_config(TokenizerConfig, tokenizer_params, "tokenizer")
    if config.vocab_path:
        tokenizer = load_tokenizer(config.vocab_path, config.lowercase, config.strip_accents, config.chinese_chars)
        logger.info("Loaded a vocabulary of %d tokens from %s", len(tokenizer), config.vocab_path)
        return tokenizer
    train_texts = corpus_documents.loc[corpus_documents["split"] == "train", "text"].tolist()
    tokenizer = train_wordpiece(
        train_texts,
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        lowercase=config.lowercase,
        strip_accents=config.strip_accents,
        chinese_chars=config.chinese_chars,
        limit_alphabet=config.limit_alphabet,
    )
    logger.info("Trained a WordPiece vocabulary of %d tokens on %d documents", len(tokenizer), len(train_texts))
    return tokenizer


def encode_corpus(
    corpus_documents: pd.DataFrame, tokenizer: PreTrainedTokenizerFast, tokenizer_params: dict
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Token ids (int32, without special tokens) of every document, and per-split stats."""
    config = build_config(TokenizerConfig, tokenizer_params, "tokenizer")
    ids = encode_documents(tokenizer, corpus_documents["text"].tolist(), config.encode_batch_size)
    token_ids = pd.DataFrame(
        {"split": corpus_documents["split"].to_numpy(), "doc_hash": corpus_documents["doc_hash"].to_numpy(), "input_ids": ids}
    )
    lengths = np.fromiter((len(a) for a in ids), dtype=np.int64, count=len(ids))
    unknown = np.fromiter((int((a == tokenizer.unk_token_id).sum()) for a in ids), dtype=np.int64, count=len(ids))
    rows = []
    for split in ("train", "valid", "test", "all"):
        chosen = np.ones(len(ids), bool) if split == "all" else (token_ids["split"] == split).to_numpy()
        tokens = int(lengths[chosen].sum())
        rows.append(
            {
                "split": split,
                "documents": int(chosen.sum()),
                "tokens": tokens,
                "unknown_tokens": int(unknown[chosen].sum()),
                "unknown_rate": float(unknown[chosen].sum() / tokens) if tokens else 0.0,
                "vocab_size": len(tokenizer),
            }
        )
    stats = pd.DataFrame(rows)
    logger.info("Encoded %d tokens; unknown-token rate %.4f%%", stats.iloc[-1]["tokens"], 100 * stats.iloc[-1]["unknown_rate"])
    return token_ids, stats
