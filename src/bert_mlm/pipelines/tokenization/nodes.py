"""Nodes of the ``tokenization`` pipeline: a WordPiece tokenizer and the corpus as a token store."""

from __future__ import annotations

import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.engine import DataConfig
from bert_mlm.core.model import ModelConfig, resolve_checkpoint
from bert_mlm.core.token_store import EncodingJob, TokenStore, token_store_stats
from bert_mlm.core.tokenizer import TokenizerConfig, load_tokenizer, train_wordpiece
from bert_mlm.core.vocabulary import adapt_vocabulary

logger = logging.getLogger(__name__)


def build_tokenizer(
    corpus_documents: DocumentShards, config: TokenizerConfig, model: ModelConfig
) -> tuple[PreTrainedTokenizerFast, dict]:
    """Train a WordPiece vocabulary on the train split (streamed; on an evenly spread sample of
    ``tokenizer.training_sample_bytes`` when the split is larger), or load ``tokenizer.vocab_path``,
    or, for continued pretraining (``model.init_from``), the checkpoint's own tokenizer. An
    inherited vocabulary is measured on the same text (its ``[UNK]`` rate, a warning above
    ``tokenizer.unk_warning_rate``) and extended by ``tokenizer.extend_vocabulary`` tokens; the
    second output says what was found and added (empty for a trained vocabulary)."""
    source = config.vocab_path or (resolve_checkpoint(model.init_from) if model.init_from else None)
    inherited = load_tokenizer(source, config.lowercase, config.strip_accents, config.chinese_chars) if source else None
    train_bytes = corpus_documents.utf8_bytes("train")
    fraction = None
    if config.training_sample_bytes and train_bytes > config.training_sample_bytes:
        fraction = config.training_sample_bytes / train_bytes
    if inherited is not None:
        origin = config.vocab_path or model.init_from
        logger.info("Loaded a vocabulary of %d tokens from %s", len(inherited), origin)
        tokenizer, report = adapt_vocabulary(inherited, lambda: corpus_documents.iter_texts("train", fraction),
                                             config, str(origin), fraction)
        return tokenizer, report.as_dict()
    tokenizer = train_wordpiece(lambda: corpus_documents.iter_texts("train", fraction), config)
    logger.info(
        "Trained a WordPiece vocabulary of %d tokens on %s of the train split (%.0f MB)",
        len(tokenizer), f"{fraction:.1%}" if fraction else "all", train_bytes / 1e6,
    )
    return tokenizer, {}


def encode_corpus(
    corpus_documents: DocumentShards, tokenizer: PreTrainedTokenizerFast, data: DataConfig
) -> EncodingJob:
    """Encode every split into the token store. Returns the work: the ``token_store`` dataset
    runs it while writing, shard by shard on all cores (or on ``data.engine: dask``)."""
    return EncodingJob(
        documents=corpus_documents,
        tokenizer_json=tokenizer.backend_tokenizer.to_str(),
        vocabulary=tokenizer.get_vocab(),
        separator_id=tokenizer.sep_token_id,
        data=data,
    )


def summarise_tokens(token_store: TokenStore, tokenizer: PreTrainedTokenizerFast) -> pd.DataFrame:
    """Per split: documents, tokens, unknown tokens and their rate, and the store's size."""
    token_store.check_tokenizer(tokenizer.get_vocab())
    stats = token_store_stats(token_store, tokenizer.unk_token_id, len(tokenizer))
    logger.info(
        "Encoded %d tokens; unknown-token rate %.4f%%; %.2f bytes per token in the store",
        stats.iloc[-1]["tokens"], 100 * stats.iloc[-1]["unknown_rate"], stats.iloc[-1]["store_bytes_per_token"],
    )
    return stats
