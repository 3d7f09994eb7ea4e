"""Nodes of the ``training`` pipeline: train the masked language model."""

from __future__ import annotations

import logging
from dataclasses import asdict

import matplotlib.pyplot as plt
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.experiment import Origin, Overrides, train_data_parallel, training_summary
from bert_mlm.core.params import build_config
from bert_mlm.core.report import training_curves
from bert_mlm.core.sequences import SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.datasets.pretrained import MaskedLM
from bert_mlm.pipelines.experiment_params import build_experiment

logger = logging.getLogger(__name__)


def train_masked_lm(
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    tokenizer: PreTrainedTokenizerBase,
    tuning_best_params: dict,
    model_params: dict,
    training_params: dict,
    masking_params: dict,
    evaluation_params: dict,
    sequence_params: dict,
    distributed_params: dict,
) -> tuple[MaskedLM, pd.DataFrame, plt.Figure, dict]:
    """Train with per-epoch dynamic masking at the tuned (or configured) probability.

    ``tuning_best_params`` holds ``masking``/``training`` overrides and their ``source``: the
    tuning study ("tuning"), a mask-rate variant ("variant"), or none ("parameters").
    Returns the model with its tokenizer, the per-step history, a loss/accuracy plot and a
    summary (tokens, throughput, the masking actually used and where it came from).
    """
    experiment = build_experiment(
        token_store, sequence_index, tokenizer,
        {"model": model_params, "training": training_params, "masking": masking_params,
         "evaluation": evaluation_params, "sequences": sequence_params},
    )
    overrides = Overrides.from_json(tuning_best_params)
    masking, training = overrides.apply(experiment.masking, experiment.training)
    sequence_index.check_words(masking.whole_word, masking.word_segmenter)
    logger.info("Training with masking %s (from %s)", asdict(masking),
                overrides.origin.value if overrides.masking else Origin.PARAMETERS.value)
    distributed = build_config(DistributedConfig, distributed_params, "distributed")
    model, result = train_data_parallel(experiment, training, masking, distributed)
    summary = training_summary(result, masking, overrides, model, sequence_index.word_segmenter, distributed.world_size)
    model.to("cpu")
    return MaskedLM(model=model, tokenizer=tokenizer), result.history, training_curves(result.history), summary

