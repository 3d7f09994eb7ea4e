"""The mask-rate study: Optuna trials that train an :class:`~bert_mlm.core.train.experiment.Experiment`
on several seeds, and the paired confirmation that decides whether the study's best is adopted.

Fairness: every trial trains the same model (same initial weights per seed, same data order)
for ``tuning.trial_steps`` and is scored on the validation split with the fixed protocol at 15 %
(never at its own rate: a higher rate makes its own task harder and would bias the study toward
low rates). Trials are only comparable under the same data, model and budget, so the study's name
carries a fingerprint of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from statistics import fmean

import optuna
import pandas as pd

from bert_mlm.config import FinetuneConfig, MaskingConfig, TrainingConfig, TuningConfig
from bert_mlm.core.evaluate.protocol import EVALUATION_SCHEME
from bert_mlm.core.finetune.runs import Runner, prepare_task
from bert_mlm.core.model.masking import MASKING_SCHEME
from bert_mlm.core.study.record import Confirmation, TuningRecord
from bert_mlm.core.study.tuning import adoption, best_parameters, masking_for, paired_interval, run_study
from bert_mlm.core.train.experiment import Experiment, train_trial
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


def finetune_scorer(experiment: Experiment, finetune: FinetuneConfig, chosen: str = "mean") -> tuple[Callable, dict]:
    """``score(model)``: 1 - the model's mean fine-tuning score over ``finetune.seeds`` (accuracy,
    or entity F1 for a token task; the error ``tuning.objective: finetune`` minimises) on the task
    ``chosen`` (``tuning.finetune_task``), or the mean error of every task; each task encoded once.
    Also the tasks' fingerprints, by name."""
    tasks = {name: task for name, task in finetune.task_configs().items() if chosen in ("mean", name)}
    runners = {name: Runner.create(prepare_task(task, experiment.tokenizer,
                                                experiment.model_config.max_position_embeddings, name),
                                   task.replace(progress=False, save_model=False), experiment.training.device,
                                   experiment.training.precision) for name, task in tasks.items()}

    def score(model) -> float:
        return fmean(1.0 - fmean(runner.seed_scores(model)) for runner in runners.values())

    return score, {name: runner.prepared.task.fingerprint() for name, runner in runners.items()}


def tune_masking(
    experiment: Experiment, config: TuningConfig, finetune: FinetuneConfig | None = None
) -> tuple[MaskingConfig, TrainingConfig | None, TuningRecord, optuna.Study]:
    """Run (or continue) the study; returns the masking to train with (the study's best when it
    was adopted, after the paired confirmation with ``tuning.adopt: if_better``), the training
    section when the study chose training values (else ``None``), the study's record, and the study."""
    score, task_digest = None, None
    if config.objective == "finetune":
        if finetune is None or not finetune.enabled:
            raise UserError("tuning.objective: finetune needs a labelled task: set finetune.train_path")
        score, fingerprints = finetune_scorer(experiment, finetune, config.finetune_task)
        task_digest = {"finetune": finetune.model_dump(exclude={"progress", "save_model"}),
                       "task": fingerprints[""] if list(fingerprints) == [""] else fingerprints}
    config, trial_training = trial_setup(experiment, config, task_digest)
    evaluation_set = experiment.evaluation_set("valid", config.eval_max_sequences)

    def seed_losses(masking, training, report=None) -> list[float]:
        """The trial's final eval loss for each of ``tuning.seeds`` training seeds; pruning
        looks at the first seed's curve."""
        return [train_trial(experiment, masking, training.replace(seed=training.seed + offset), evaluation_set,
                            config.eval_every, report if offset == 0 and report else (lambda *_: None), score)
                for offset in range(config.seeds)]

    def run_trial(trial: optuna.Trial, values: dict, report) -> float:
        masking = masking_for(values, experiment.masking)
        training = trial_training.replace(learning_rate=values.get("learning_rate", trial_training.learning_rate))
        logger.info("Trial %d: %s", trial.number, values)
        losses = seed_losses(masking, training, report)
        trial.set_user_attr("seed_losses", losses)
        if score is not None:  # the value is the fine-tuning error; record the scores (accuracy, entity F1) too
            trial.set_user_attr("finetune_score", [1.0 - loss for loss in losses])
        trial.set_user_attr("seed_spread", float(pd.Series(losses).std()) if len(losses) > 1 else 0.0)
        return float(sum(losses) / len(losses))

    study = run_study(config, run_trial)
    best = best_parameters(study, config)
    logger.info("Best trial %d: %s %.4f with %s", best.best_trial, MEASURES[config.objective], best.best_value,
                best.masking)
    if config.adopt == "if_better":
        # The best trial already trained the tuned setting on these seeds, masks and weights.
        tuned_losses = study.trials[best.best_trial].user_attrs.get("seed_losses")
        best = confirm(best, experiment, trial_training, seed_losses, tuned_losses, MEASURES[config.objective])
    if best.source != "tuning":
        return experiment.masking, None, best, study
    training = experiment.training.updated(best.training) if best.training else None
    return masking_for(best.masking, experiment.masking), training, best, study


def trial_setup(experiment: Experiment, config: TuningConfig,
                digest: dict | None) -> tuple[TuningConfig, TrainingConfig]:
    """The study's name with a fingerprint of what makes its trials comparable (the data, model,
    trial budget and objective, and ``digest``: what else the objective depends on), so that a rerun
    continues its study and a changed setup starts a new one; and a trial's training section."""
    config = config.replace(study_name=f"{config.study_name}-{study_fingerprint(experiment, config, digest)}")
    warmup = experiment.training.warmup_for(experiment.training.step_budget(len(experiment.sequences.get("train", []))))
    # A trial validates on the study's own set, every tuning.eval_every steps (train_trial): no eval_every of its own.
    return config, experiment.training.replace(max_steps=config.trial_steps, epochs=None, checkpoint_every=0,
                                               warmup_steps=min(warmup, config.trial_steps // 5), resume=False,
                                               progress=False, eval_every=0, keep_best=False)


MEASURES = {"eval_loss": "eval loss", "finetune": "fine-tuning error"}


def confirm(best: TuningRecord, experiment, trial_training, seed_losses, tuned: list[float] | None = None,
            measure: str = "eval loss") -> TuningRecord:
    """Pair the best setting with the configured one on the same seeds and evaluation masks
    (``tuned``: the best trial's own per-seed losses, when it recorded one for every seed); keep
    the tuned setting only when the difference is clear of seed noise."""
    configured = seed_losses(experiment.masking, trial_training)
    if tuned is None or len(tuned) != len(configured):
        tuned = seed_losses(masking_for(best.masking, experiment.masking), trial_training.replace(**best.training))
    interval = paired_interval([c - t for c, t in zip(configured, tuned, strict=True)])
    adopted, reason = adoption(interval, "if_better", measure)
    logger.info("Tuning confirmation: %s", reason)
    return best.confirmed(Confirmation(tuned, configured, experiment.masking.probability, interval["mean"],
                                       interval["low"], interval["high"], adopted, reason), experiment.masking)


# Training settings that do not change what a trial measures (its budget is tuning.trial_steps;
# how often the host reads the loss and whether the encoder is compiled are speed, not results;
# a trial validates on the study's own set, never with training.eval_every's).
NOT_COMPARED_TRAINING = ("progress", "resume", "checkpoint_every", "checkpoint_dir", "keep_checkpoints", "max_steps",
                         "epochs", "record_every", "compile", "threads", "eval_every", "eval_masked_tokens",
                         "keep_best")
COMPARED_TUNING = ("trial_steps", "eval_every", "search_space", "eval_max_sequences", "seeds")
# Settings added after studies were named, with what every earlier run did: left out at that value, so that
# those studies keep their names (a run of another value is another study).
ADDED_MODEL_SETTINGS = {"initializer_range": 0.02, "initialisation": "bert"}


def as_before(section, earlier: dict) -> set[str]:
    return {name for name, value in earlier.items() if getattr(section, name) == value}


def study_fingerprint(experiment, config: TuningConfig, task: dict | None = None) -> str:
    digest, model = hashlib.blake2b(digest_size=5), experiment.model_config.resolved()
    comparable = {
        "model": model.model_dump(exclude=as_before(model, ADDED_MODEL_SETTINGS)),
        "training": experiment.training.model_dump(exclude=set(NOT_COMPARED_TRAINING)),
        "masking": experiment.masking.model_dump(), "evaluation": experiment.evaluation.model_dump(),
        "sequences": experiment.sequence_config.model_dump(),
        "tuning": config.model_dump(include=set(COMPARED_TUNING)),
        "masking_scheme": MASKING_SCHEME, "evaluation_scheme": EVALUATION_SCHEME,
        # The data: digests of the stored tokens and of the sequence index (not the tokens themselves).
        "data": {split: experiment.sequences[split].fingerprint for split in ("train", "valid")
                 if split in experiment.sequences},
    }
    if config.objective != "eval_loss":  # eval-loss studies keep the names they had
        comparable.update(objective=config.objective, finetune_task=task)
    digest.update(json.dumps(comparable, sort_keys=True, default=str).encode())
    return digest.hexdigest()
