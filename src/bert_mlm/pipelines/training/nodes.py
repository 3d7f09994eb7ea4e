"""Nodes of the ``training`` pipeline: train the masked language model."""

from __future__ import annotations

import logging
from dataclasses import asdict

import matplotlib.pyplot as plt
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.evaluation import EvaluationParameters
from bert_mlm.core.experiment import Experiment, Origin, Overrides, train_data_parallel, training_summary
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.report import training_curves
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.training_config import TrainingConfig
from bert_mlm.datasets.pretrained import MaskedLM

logger = logging.getLogger(__name__)


def train_masked_lm(
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    tokenizer: PreTrainedTokenizerBase,
    tuning_best_params: dict,
    model: ModelConfig,
    training: TrainingConfig,
    masking: MaskingConfig,
    evaluation: EvaluationParameters,
    sequences: SequenceConfig,
    distributed: DistributedConfig,
) -> tuple[MaskedLM, pd.DataFrame, plt.Figure, dict]:
    """Train with per-epoch dynamic masking at the tuned (or configured) probability.

    ``tuning_best_params`` holds the ``masking``/``training`` overrides of the tuning study or of
    a mask-rate variant, and their origin (:class:`~bert_mlm.core.experiment.Overrides`).
    Returns the model with its tokenizer, the per-step history, a loss/accuracy plot and a
    summary (tokens, throughput, the masking actually used and where it came from).
    """
    experiment = Experiment.from_store(token_store, sequence_index, tokenizer, model=model, training=training,
                                       masking=masking, evaluation=evaluation.protocol, sequences=sequences)
    overrides = Overrides.from_json(tuning_best_params)
    masking, training = overrides.apply(masking, training)
    sequence_index.check_words(masking.whole_word, masking.word_segmenter)
    logger.info("Training with masking %s (from %s)", asdict(masking),
                overrides.origin.value if overrides.masking else Origin.PARAMETERS.value)
    trained, result = train_data_parallel(experiment, training, masking, distributed)
    summary = training_summary(result, masking, overrides, trained, sequence_index.word_segmenter, distributed.world_size)
    trained.to("cpu")
    return MaskedLM(model=trained, tokenizer=tokenizer), result.history, training_curves(result.history), summary
