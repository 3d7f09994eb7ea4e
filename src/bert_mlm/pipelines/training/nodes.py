"""Nodes of the ``training`` pipeline: train the masked language model."""

from __future__ import annotations

import logging

import matplotlib.pyplot as plt
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.config import (
    CorpusConfig,
    DistributedConfig,
    EvaluationParameters,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TrainingConfig,
)
from bert_mlm.core.record.figures import training_curves
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.tokens.sequences import SequenceIndex
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.experiment import Experiment, mixture_shares, train_data_parallel
from bert_mlm.core.train.result import TrainingSummary
from bert_mlm.datasets.pretrained import MaskedLM

logger = logging.getLogger(__name__)


def train_masked_lm(token_store: TokenStore, sequence_index: SequenceIndex, tokenizer: PreTrainedTokenizerBase,
                    masking: MaskingConfig, resolved_training: TrainingConfig | dict, tuning_record: TuningRecord,
                    model: ModelConfig, training: TrainingConfig, evaluation: EvaluationParameters,
                    sequences: SequenceConfig, distributed: DistributedConfig,
                    corpus: CorpusConfig) -> tuple[MaskedLM, pd.DataFrame, plt.Figure, TrainingSummary]:
    """Train with per-epoch dynamic masking, with the masking the tuning stage resolved (a variant's,
    in its namespace) and its training section where the study chose training values (else ``{}``:
    ``training``). Returns the model with its tokenizer, the per-step history, a loss/accuracy plot
    and the summary. ``corpus.sources``' weights apply here, per epoch: changing one re-runs no data stage.
    """
    training = resolved_training or training
    experiment = Experiment.from_store(token_store, sequence_index, tokenizer, model=model, training=training,
                                       masking=masking, evaluation=evaluation.protocol, sequences=sequences,
                                       mixture=tuning_record.sources(corpus.sources))  # a study's replay share
    logger.info("Training with masking %s (from %s; every other value its default)",
                masking.model_dump(exclude_defaults=True) or "as its defaults", tuning_record.source)
    logger.info("Training with %s", experiment.schedule_note)
    trained, result = train_data_parallel(experiment, distributed)
    summary = TrainingSummary.of(
        result, masking, probability_source=tuning_record.probability_source, decision=tuning_record.decision,
        tuning_run=tuning_record.version, parameter_count=sum(p.numel() for p in trained.parameters()),
        word_segmenter=sequence_index.word_segmenter, world_size=distributed.world_size,
        mixture=mixture_shares(experiment.sequences.get("train"), training.seed), eval_every=training.eval_every,
        schedule_note=experiment.schedule_note)
    trained.to("cpu")
    curves = training_curves(result.history, summary.kept_step)
    return MaskedLM(model=trained, tokenizer=tokenizer), result.history, curves, summary
