"""Nodes of the ``tokenization`` pipeline: a WordPiece tokenizer and the corpus as a token store."""

from __future__ import annotations

import functools
import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.config import (
    DataConfig,
    EvaluationParameters,
    MaskingConfig,
    ModelConfig,
    TokenizerConfig,
    TuningConfig,
    whole_word_requested,
)
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.model.bert import resolve_checkpoint
from bert_mlm.core.tokens.token_store import TokenStore, token_store_stats
from bert_mlm.core.tokens.tokenization import EncodingJob, TokenizerJob, sample_fraction, train_texts
from bert_mlm.core.tokens.tokenizer import load_tokenizer
from bert_mlm.core.tokens.vocabulary import adapt_vocabulary
from bert_mlm.core.tokens.words import SEGMENTER_SAMPLE_CHARS, stored_word_segmenter

logger = logging.getLogger(__name__)


def build_tokenizer(corpus_documents: DocumentShards, config: TokenizerConfig, model: ModelConfig,
                    data: DataConfig | None = None) -> tuple[PreTrainedTokenizerFast | TokenizerJob, dict]:
    """Train a WordPiece vocabulary on the train split (as a job the ``tokenizer`` dataset runs when
    it saves, or reuses: ``data.reuse``), or load ``tokenizer.vocab_path`` or ``model.init_from``'s
    tokenizer, measured on the same text (its ``[UNK]`` rate) and extended by up to
    ``tokenizer.extend_vocabulary`` tokens; the second output says what was found and added."""
    source = config.vocab_path or (resolve_checkpoint(model.init_from) if model.init_from else None)
    if not source:
        return TokenizerJob(corpus_documents, config, data or DataConfig()), {}
    tokenizer = load_tokenizer(source, config.lowercase, config.strip_accents, config.chinese_chars)
    origin = config.vocab_path or model.init_from
    logger.info("Loaded a vocabulary of %d tokens from %s", len(tokenizer), origin)
    fraction = sample_fraction(corpus_documents, config)
    # The measurement reads the texts a few times, each pass with its progress.
    passes = functools.partial(train_texts, corpus_documents, fraction, "vocabulary coverage")
    tokenizer, report = adapt_vocabulary(tokenizer, passes, config, redact(str(origin)), fraction)
    return tokenizer, report.as_dict()


def encode_corpus(corpus_documents: DocumentShards, tokenizer: PreTrainedTokenizerFast, data: DataConfig,
                  masking: MaskingConfig, evaluation: EvaluationParameters, tuning: TuningConfig) -> EncodingJob:
    """Encode every split into the token store. Returns the work: the ``token_store`` dataset
    runs it while writing, on ``data.engine``. Where the run masks whole Chinese words, their
    boundaries are found in the same pass and stored beside the tokens."""
    _, stored = stored_word_segmenter(masking.word_segmenter, whole_word_requested(masking, evaluation, tuning),
                                      corpus_documents.sample_texts("train", SEGMENTER_SAMPLE_CHARS))
    return EncodingJob(documents=corpus_documents, tokenizer_json=tokenizer.backend_tokenizer.to_str(),
                       vocabulary=tokenizer.get_vocab(), separator_id=tokenizer.sep_token_id, data=data,
                       word_segmenter=stored)


def summarise_tokens(token_store: TokenStore, tokenizer: PreTrainedTokenizerFast) -> pd.DataFrame:
    """Per split: documents, tokens, unknown tokens and their rate, and the store's size."""
    token_store.check_tokenizer(tokenizer.get_vocab())
    stats = token_store_stats(token_store, tokenizer.unk_token_id, len(tokenizer))
    logger.info("Encoded %d tokens; unknown-token rate %.4f%%; %.2f bytes per token in the store",
                stats.iloc[-1]["tokens"], 100 * stats.iloc[-1]["unknown_rate"], stats.iloc[-1]["store_bytes_per_token"])
    return stats
