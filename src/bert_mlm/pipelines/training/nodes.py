"""Nodes of the ``training`` pipeline: train the masked language model."""

from __future__ import annotations

import logging
from dataclasses import asdict

import matplotlib.pyplot as plt
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.experiment import Origin, Overrides, train_data_parallel
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
    summary = {
        "train_tokens": result.train_tokens,
        "train_seconds": result.seconds,
        "train_tokens_per_second": result.tokens_per_second,
        "train_steps": int(result.history["step"].max()) if len(result.history) else 0,
        "final_train_loss": float(result.history["loss"].tail(20).mean()) if len(result.history) else None,
        "device": result.device,
        "precision": result.precision,
        "resumed_from_step": result.resumed_from_step,
        "mask_probability": masking.probability,
        "mask_schedule": masking.schedule,
        "final_mask_probability": masking.final_probability if masking.schedule == "linear" else masking.probability,
        "mask_token_fraction": masking.mask_token_fraction,
        "random_token_fraction": masking.random_token_fraction,
        "whole_word": masking.whole_word,
        "word_segmenter": sequence_index.word_segmenter if masking.word_segmenter == "auto" else masking.word_segmenter,
        "mask_probability_source": overrides.probability_origin.value,
        "learning_rate": result.learning_rate,
        "tuning_decision": overrides.decision,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "data_parallel_workers": distributed.world_size,
    }
    model.to("cpu")
    return MaskedLM(model=model, tokenizer=tokenizer), result.history, training_curves(result.history), summary

