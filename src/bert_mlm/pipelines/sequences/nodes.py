"""Nodes of the ``sequences`` pipeline: the token store -> an index of model-input sequences."""

from __future__ import annotations

import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.core.corpus import SPLITS
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import Collator, SequenceConfig, SequenceIndex, build_sequence_index, sequence_stats
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.tokenizer import special_token_ids
from bert_mlm.core.training import TrainingConfig

logger = logging.getLogger(__name__)


def build_model_inputs(
    token_store: TokenStore,
    tokenizer: PreTrainedTokenizerFast,
    sequence_params: dict,
    model_params: dict,
    training_params: dict,
) -> tuple[SequenceIndex, pd.DataFrame]:
    """Pack or split each split's documents into sequences of at most ``sequences.max_length``.

    Returns an index into the token store (no token is copied) and per-split stats with the
    padding efficiency of the chosen padding mode at the training batch size.
    """
    config = build_config(SequenceConfig, sequence_params, "sequences")
    config.check_fits(build_config(ModelConfig, model_params, "model").max_position_embeddings)
    training = build_config(TrainingConfig, training_params, "training")
    token_store.check_tokenizer(tokenizer.get_vocab())
    index = build_sequence_index(token_store, config, SPLITS)
    collator = Collator(tokenizer.pad_token_id, special_token_ids(tokenizer), config.max_length, config.padding)
    stats = pd.DataFrame(sequence_stats(index, token_store, collator, training.batch_size, training.bucketing))
    if stats.loc[stats["split"] == "train", "sequences"].iloc[0] == 0:
        raise ValueError("sequences: the train split produced no sequence; the corpus is too small")
    for split in ("valid", "test"):
        if stats.loc[stats["split"] == split, "sequences"].iloc[0] == 0:
            logger.warning("sequences: the %s split is empty; tuning (valid) and evaluation (test) need it", split)
    logger.info("Sequences per split: %s", dict(zip(stats["split"], stats["sequences"], strict=True)))
    return index, stats
