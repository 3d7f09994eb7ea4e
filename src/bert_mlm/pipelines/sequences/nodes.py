"""Nodes of the ``sequences`` pipeline: the token store -> an index of model-input sequences."""

from __future__ import annotations

import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.core.corpus import SPLITS
from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.engine import DataConfig
from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex, build_sequence_index, sequence_stats
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.training import TokenIds, TrainingConfig
from bert_mlm.core.words import WordSegmentationJob, resolve_segmenter
from bert_mlm.pipelines.experiment_params import whole_word_requested

SEGMENTER_SAMPLE_CHARS = 200_000

logger = logging.getLogger(__name__)


def build_model_inputs(
    token_store: TokenStore,
    tokenizer: PreTrainedTokenizerFast,
    corpus_documents: DocumentShards,
    sequence_params: dict,
    model_params: dict,
    training_params: dict,
    masking_params: dict,
    evaluation_params: dict,
    tuning_params: dict,
    data_params: dict,
) -> tuple[SequenceIndex, pd.DataFrame]:
    """Pack or split each split's documents into sequences of at most ``sequences.max_length``.

    Returns an index into the token store (no token is copied) and per-split stats with the
    padding efficiency of the chosen padding mode at the training batch size. For whole-word
    masking on jieba words, the index also gets each token's word boundary (written beside it).
    """
    config = build_config(SequenceConfig, sequence_params, "sequences")
    config.check_fits(build_config(ModelConfig, model_params, "model").max_position_embeddings)
    training = build_config(TrainingConfig, training_params, "training")
    masking = build_config(MaskingConfig, masking_params, "masking")
    token_store.check_tokenizer(tokenizer.get_vocab())
    segmenter = resolve_segmenter(masking.word_segmenter, corpus_documents.sample_texts("train", SEGMENTER_SAMPLE_CHARS))
    job = None
    if segmenter == "jieba" and whole_word_requested(masking_params, evaluation_params, tuning_params):
        job = WordSegmentationJob(
            documents=corpus_documents,
            tokenizer_json=tokenizer.backend_tokenizer.to_str(),
            separator_id=tokenizer.sep_token_id,
            dtype=token_store.dtype.name,
            store_digests={split: token_store.digest(split) for split in SPLITS},
            store_tokens={split: token_store.split(split).num_tokens for split in SPLITS},
            data=build_config(DataConfig, data_params, "data"),
        )
    logger.info("Word boundaries for whole-word masking: %s%s", segmenter,
                "" if segmenter == "wordpiece" or job else " (not segmented: no whole-word masking asked for)")
    index = build_sequence_index(token_store, config, SPLITS, segmenter, job)
    collator = TokenIds.from_tokenizer(tokenizer).collator(config.max_length, config.padding)
    stats = pd.DataFrame(sequence_stats(index, token_store, collator, training.batch_size, training.bucketing))
    if stats.loc[stats["split"] == "train", "sequences"].iloc[0] == 0:
        raise UserError("sequences: the train split produced no sequence; the corpus is too small")
    for split in ("valid", "test"):
        if stats.loc[stats["split"] == split, "sequences"].iloc[0] == 0:
            logger.warning("sequences: the %s split is empty; tuning (valid) and evaluation (test) need it", split)
    logger.info("Sequences per split: %s", dict(zip(stats["split"], stats["sequences"], strict=True)))
    return index, stats
