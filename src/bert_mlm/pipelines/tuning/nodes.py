"""Nodes of the ``tuning`` pipeline: an Optuna study over the masking probability."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, replace

import optuna
import pandas as pd
import plotly.graph_objects as go
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.evaluation import EVALUATION_SCHEME
from bert_mlm.core.experiment import Origin, train_trial
from bert_mlm.core.masking import MASKING_SCHEME
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.tuning import (
    SEARCHABLE,
    TuningConfig,
    adoption,
    best_parameters,
    masking_for,
    paired_interval,
    run_study,
    trials_table,
)
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

    # Trials are only comparable under the same data, model and trial budget: the study name
    # carries a fingerprint of them, so a rerun continues its study and a changed setup starts a
    # new one instead of mixing incomparable trials.
    config = replace(config, study_name=f"{config.study_name}-{study_fingerprint(experiment, config)}")
    trial_training = replace(
        experiment.training, max_steps=config.trial_steps, warmup_steps=min(experiment.training.warmup_steps, config.trial_steps // 5),
        checkpoint_every=0, resume=False, progress=False,
    )
    evaluation_set = experiment.evaluation_set("valid", config.eval_max_sequences)

    def seed_losses(masking, training, report=None) -> list[float]:
        """The trial's final eval loss for each of ``tuning.seeds`` training seeds; pruning
        looks at the first seed's curve."""
        return [
            train_trial(experiment, masking, replace(training, seed=training.seed + offset), evaluation_set,
                        config.eval_every, report if offset == 0 and report else (lambda *_: None))
            for offset in range(config.seeds)
        ]

    def run_trial(trial: optuna.Trial, values: dict, report) -> float:
        masking = masking_for(values, experiment.masking)
        training = replace(trial_training, learning_rate=values.get("learning_rate", trial_training.learning_rate))
        logger.info("Trial %d: %s", trial.number, values)
        losses = seed_losses(masking, training, report)
        trial.set_user_attr("seed_losses", losses)
        trial.set_user_attr("seed_spread", float(pd.Series(losses).std()) if len(losses) > 1 else 0.0)
        return float(sum(losses) / len(losses))

    study = run_study(config, run_trial)
    trials = trials_table(study)
    best = best_parameters(study, config)
    logger.info("Best trial %d: eval loss %.4f with %s", best["best_trial"], best["best_eval_loss"], best.get("masking"))
    if config.adopt == "if_better":
        # The best trial already trained the tuned setting on these seeds, masks and weights.
        tuned_losses = study.trials[best["best_trial"]].user_attrs.get("seed_losses")
        best = confirm(best, experiment, trial_training, seed_losses, tuned_losses)
    return best, trials, objective_plot(trials), optuna.visualization.plot_optimization_history(study)


def confirm(best: dict, experiment, trial_training, seed_losses, tuned: list[float] | None = None) -> dict:
    """Pair the best setting with the configured one on the same seeds and evaluation masks
    (``tuned``: the best trial's own per-seed losses, when it recorded one for every seed); keep
    the tuned setting only when the difference is clear of seed noise."""
    configured = seed_losses(experiment.masking, trial_training)
    if tuned is None or len(tuned) != len(configured):
        tuned_masking = masking_for(best.get("masking", {}), experiment.masking)
        tuned = seed_losses(tuned_masking, replace(trial_training, **best.get("training", {})))
    interval = paired_interval([c - t for c, t in zip(configured, tuned, strict=True)])
    adopted, reason = adoption(interval, "if_better")
    logger.info("Tuning confirmation: %s", reason)
    confirmation = {
        "tuned_losses": tuned, "configured_losses": configured, "configured_probability": experiment.masking.probability,
        "difference": interval["mean"], "ci_low": interval["low"], "ci_high": interval["high"],
        "adopted": adopted, "reason": reason,
    }
    if adopted:
        return {**best, "confirmation": confirmation}
    return {"masking": {"probability": experiment.masking.probability}, "source": Origin.PARAMETERS.value,
            "tuned": {k: best[k] for k in ("masking", "training") if k in best}, "confirmation": confirmation,
            **{k: best[k] for k in ("study_name", "storage", "best_trial", "best_eval_loss", "finished_trials")}}


def study_fingerprint(experiment, config: TuningConfig) -> str:
    digest = hashlib.blake2b(digest_size=5)
    comparable = {
        "model": asdict(experiment.model_config),
        "training": {k: v for k, v in asdict(experiment.training).items() if k not in ("progress", "resume", "checkpoint_every", "checkpoint_dir", "keep_checkpoints", "max_steps", "epochs")},
        "masking": asdict(experiment.masking),
        "evaluation": asdict(experiment.evaluation),
        "sequences": asdict(experiment.sequence_config),
        "tuning": {k: v for k, v in asdict(config).items() if k in ("trial_steps", "eval_every", "search_space", "eval_max_sequences", "seeds")},
        "masking_scheme": MASKING_SCHEME,
        "evaluation_scheme": EVALUATION_SCHEME,
        # The data: digests of the stored tokens and of the sequence index (not the tokens themselves).
        "data": {split: experiment.sequences[split].fingerprint for split in ("train", "valid") if split in experiment.sequences},
    }
    digest.update(json.dumps(comparable, sort_keys=True, default=str).encode())
    return digest.hexdigest()


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
