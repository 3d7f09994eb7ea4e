"""Nodes of the ``sequences`` pipeline: token ids -> model-input sequences and their stats."""

from __future__ import annotations

import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import Collator, SequenceConfig, batch_order, build_sequences, padding_efficiency
from bert_mlm.core.tokenizer import special_token_ids
from bert_mlm.core.training import TrainingConfig

logger = logging.getLogger(__name__)


def build_model_inputs(
    token_ids: pd.DataFrame,
    tokenizer: PreTrainedTokenizerFast,
    sequence_params: dict,
    model_params: dict,
    training_params: dict,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pack or split each split's documents into sequences of at most ``sequences.max_length``.

    Returns the sequences (``split``, ``input_ids`` unpadded and starting with ``[CLS]``,
    ``length``) and per-split stats with the padding efficiency of the chosen padding mode at
    the training batch size.
    """
    config = build_config(SequenceConfig, sequence_params, "sequences")
    config.check_fits(build_config(ModelConfig, model_params, "model").max_position_embeddings)
    training = build_config(TrainingConfig, training_params, "training")
    collator = Collator(tokenizer.pad_token_id, special_token_ids(tokenizer), config.max_length, config.padding)
    frames, rows = [], []
    for split in ("train", "valid", "test"):
        documents = token_ids.loc[token_ids["split"] == split, "input_ids"].tolist()
        sequences = build_sequences(documents, config.mode, config.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        lengths = [len(s) for s in sequences]
        frames.append(pd.DataFrame({"split": split, "input_ids": sequences, "length": lengths}))
        batches = batch_order(lengths, training.batch_size, None, bucketed=training.bucketing and split == "train")
        rows.append(
            {
                "split": split,
                "sequences": len(sequences),
                "tokens": int(sum(lengths)),
                "document_tokens": int(sum(len(d) for d in documents)),
                "mean_length": float(sum(lengths) / len(lengths)) if lengths else 0.0,
                "padding_efficiency": padding_efficiency(lengths, batches, collator),
                "mode": config.mode,
                "padding": config.padding,
                "max_length": config.max_length,
            }
        )
    stats = pd.DataFrame(rows)
    if stats.loc[stats["split"] == "train", "sequences"].iloc[0] == 0:
        raise ValueError("sequences: the train split produced no sequence; the corpus is too small")
    for split in ("valid", "test"):
        if stats.loc[stats["split"] == split, "sequences"].iloc[0] == 0:
            logger.warning("sequences: the %s split is empty; tuning (valid) and evaluation (test) need it", split)
    logger.info("Sequences per split: %s", dict(zip(stats["split"], stats["sequences"], strict=True)))
    return pd.concat(frames, ignore_index=True), stats
