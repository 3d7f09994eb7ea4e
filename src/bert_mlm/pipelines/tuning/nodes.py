"""Nodes of the ``tuning`` pipeline: an Optuna study over the masking probability."""

from __future__ import annotations

import logging

import optuna
import pandas as pd
import plotly.graph_objects as go
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.experiment import Origin
from bert_mlm.core.mask_study import tune_masking
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.tuning import SEARCHABLE, TuningConfig, trials_table
from bert_mlm.pipelines.experiment_params import build_experiment

logger = logging.getLogger(__name__)


def tune_mask_probability(
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    tokenizer: PreTrainedTokenizerBase,
    tuning_params: dict,
    model_params: dict,
    training_params: dict,
    masking_params: dict,
    evaluation_params: dict,
    sequence_params: dict,
) -> tuple[dict, pd.DataFrame, go.Figure, go.Figure]:
    """Run (or continue) the study; return the best parameters, the trials and two plots.

    With ``tuning.n_trials: 0`` the study is skipped and the configured probability is passed on.
    """
    config = build_config(TuningConfig, tuning_params, "tuning")
    experiment = build_experiment(
        token_store, sequence_index, tokenizer,
        {"model": model_params, "training": training_params, "masking": masking_params,
         "evaluation": evaluation_params, "sequences": sequence_params},
    )
    if True in (config.search_space.get("whole_word") or ()):
        sequence_index.check_words(True, experiment.masking.word_segmenter, "tuning.search_space.whole_word")
    if config.n_trials == 0:
        logger.info("tuning.n_trials is 0: training with masking.probability=%s", experiment.masking.probability)
        best = {"masking": {"probability": experiment.masking.probability}, "source": Origin.PARAMETERS.value}
        return best, pd.DataFrame(columns=["number", "state", "value"]), go.Figure(), go.Figure()

    best, study = tune_masking(experiment, config)
    trials = trials_table(study)
    return best, trials, objective_plot(trials), optuna.visualization.plot_optimization_history(study)


def objective_plot(trials: pd.DataFrame) -> go.Figure:
    """Fixed-protocol eval loss against the masking probability, every trial shown (pruned ones
    at their last reported value)."""
    figure = go.Figure()
    x_column = "params_probability" if "params_probability" in trials else next(
        (f"params_{k}" for k in SEARCHABLE if f"params_{k}" in trials), None
    )
    if x_column is None:
        return figure
    for state, symbol in (("COMPLETE", "circle"), ("PRUNED", "x")):
        part = trials[trials["state"] == state]
        y = part["value"] if state == "COMPLETE" else part["last_intermediate_value"]
        figure.add_trace(go.Scatter(
            x=part[x_column], y=y, mode="markers", name=state.lower(), marker={"symbol": symbol, "size": 10},
            text=[f"trial {n}" for n in part["number"]],
        ))
    figure.update_layout(
        title="Fixed-protocol eval loss vs masking probability",
        xaxis_title=x_column.removeprefix("params_"), yaxis_title="eval loss (15 % fixed masks)",
    )
    return figure
