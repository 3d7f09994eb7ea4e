"""The mask-rate study: Optuna trials that train an :class:`~bert_mlm.core.experiment.Experiment`
on several seeds, and the paired confirmation that decides whether the study's best is adopted.

Fairness: every trial trains the same model (same initial weights per seed, same data order)
for ``tuning.trial_steps`` and is scored on the validation split with the fixed protocol. Trials
are only comparable under the same data, model and budget, so the study's name carries a
fingerprint of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, replace

import optuna
import pandas as pd

from bert_mlm.core.evaluation import EVALUATION_SCHEME
from bert_mlm.core.experiment import Experiment, Origin, train_trial
from bert_mlm.core.masking import MASKING_SCHEME
from bert_mlm.core.tuning import TuningConfig, adoption, best_parameters, masking_for, paired_interval, run_study

logger = logging.getLogger(__name__)


def tune_masking(experiment: Experiment, config: TuningConfig) -> tuple[dict, optuna.Study]:
    """Run (or continue) the study; returns the best parameters (after the confirmation when
    ``tuning.adopt`` is ``if_better``) and the study."""
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
    best = best_parameters(study, config)
    logger.info("Best trial %d: eval loss %.4f with %s", best["best_trial"], best["best_eval_loss"], best.get("masking"))
    if config.adopt == "if_better":
        # The best trial already trained the tuned setting on these seeds, masks and weights.
        tuned_losses = study.trials[best["best_trial"]].user_attrs.get("seed_losses")
        best = confirm(best, experiment, trial_training, seed_losses, tuned_losses)
    return best, study


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
