"""Nodes of the ``sequences`` pipeline: the token store -> an index of model-input sequences."""

from __future__ import annotations

import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.config import (
    DataConfig,
    EvaluationParameters,
    MaskingConfig,
    SequenceConfig,
    TrainingConfig,
    TuningConfig,
    whole_word_requested,
)
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.batches import sequence_stats
from bert_mlm.core.tokens.sequences import SequenceIndex, index_token_store
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.tokens.words import SEGMENTER_SAMPLE_CHARS, stored_word_segmenter
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


def build_model_inputs(token_store: TokenStore, tokenizer: PreTrainedTokenizerFast, corpus_documents: DocumentShards,
                       config: SequenceConfig, training: TrainingConfig, masking: MaskingConfig,
                       evaluation: EvaluationParameters, tuning: TuningConfig,
                       data: DataConfig) -> tuple[SequenceIndex, pd.DataFrame]:
    """Pack or split each split's documents into sequences of at most ``sequences.max_length``: an
    index into the token store (no token is copied; with jieba words' boundaries where whole-word
    masking needs them) and per-split stats with the padding efficiency at the training batch size.
    """
    segmenter, stored = stored_word_segmenter(masking.word_segmenter, whole_word_requested(masking, evaluation, tuning),
                                              corpus_documents.sample_texts("train", SEGMENTER_SAMPLE_CHARS))
    logger.info("Word boundaries for whole-word masking: %s%s", segmenter,
                "" if segmenter == "wordpiece" or stored else " (not segmented: no whole-word masking asked for)")
    index = index_token_store(token_store, tokenizer, config, segmenter, stored)
    index.reuse = data.reuse
    collator = TokenIds.from_tokenizer(tokenizer).collator(config.max_length, config.padding)
    stats = pd.DataFrame(sequence_stats(index, token_store, collator, training.batch_size, training.bucketing))
    counts = dict(zip(stats["split"], stats["sequences"], strict=True))
    if counts["train"] == 0:
        raise UserError("sequences: the train split produced no sequence; the corpus is too small")
    for split in (s for s in ("valid", "test") if counts[s] == 0):
        logger.warning("sequences: the %s split is empty; tuning (valid) and evaluation (test) need it", split)
    logger.info("Sequences per split: %s", counts)
    return index, stats
