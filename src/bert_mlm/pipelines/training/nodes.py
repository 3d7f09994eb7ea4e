"""Nodes of the ``training`` pipeline: train the masked language model."""

from __future__ import annotations

import logging
from dataclasses import asdict

import matplotlib.pyplot as plt
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.evaluation import EvaluationParameters
from bert_mlm.core.experiment import Experiment, train_data_parallel, training_summary
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.report import training_curves
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.training_config import TrainingConfig
from bert_mlm.core.tuning_result import TuningResult
from bert_mlm.datasets.pretrained import MaskedLM

logger = logging.getLogger(__name__)


def train_masked_lm(
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    tokenizer: PreTrainedTokenizerBase,
    tuning_best_params: TuningResult,
    model: ModelConfig,
    training: TrainingConfig,
    masking: MaskingConfig,
    evaluation: EvaluationParameters,
    sequences: SequenceConfig,
    distributed: DistributedConfig,
) -> tuple[MaskedLM, pd.DataFrame, plt.Figure, dict]:
    """Train with per-epoch dynamic masking at the tuned (or configured) probability.

    ``tuning_best_params``: the tuning study's result, or a mask-rate variant's overrides in its
    place (:class:`~bert_mlm.core.tuning_result.TuningResult`), applied here and only here.
    Returns the model with its tokenizer, the per-step history, a loss/accuracy plot and a
    summary (tokens, throughput, the masking actually used and where it came from).
    """
    masking, training = tuning_best_params.apply(masking, training)
    experiment = Experiment.from_store(token_store, sequence_index, tokenizer, model=model, training=training,
                                       masking=masking, evaluation=evaluation.protocol, sequences=sequences)
    logger.info("Training with masking %s (from %s)", asdict(masking), tuning_best_params.masking_origin.value)
    trained, result = train_data_parallel(experiment, distributed)
    summary = training_summary(result, masking, tuning_best_params, trained, sequence_index.word_segmenter,
                               distributed.world_size, training.eval_every)
    trained.to("cpu")
    curves = training_curves(result.history, summary["kept_step"])
    return MaskedLM(model=trained, tokenizer=tokenizer), result.history, curves, summary
