"""The study of continued pretraining (``tuning.objective: continued``): what the domain gains
against what the general text forgets. Two objectives, both paired against the starting model on
the same masked tokens: the domain's held-out loss change (the study's valid set) and the general
text's (``evaluation.corpus_path``; the replayed file's held-out side when it is that file). Optuna
keeps the Pareto front; ``tuning.forgetting_budget`` adopts one point of it (:func:`adopted_point`).
A study on the domain loss alone pushes toward forgetting (BENCHMARKS "Continued pretraining": -0.79
on the domain for +0.42 to +0.60 on general text at the from-scratch rate)."""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from statistics import fmean, variance

import optuna
import torch
from optuna.trial import FrozenTrial

from bert_mlm.config import MaskingConfig, TrainingConfig, TuningConfig
from bert_mlm.config.corpus import REPLAY_SOURCE, with_replay_share
from bert_mlm.core.common.device import resolve_device
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.corpus import RawText
from bert_mlm.core.evaluate.protocol import paired_change, prepare_evaluation_set, score_sequences
from bert_mlm.core.study.mask_study import trial_setup
from bert_mlm.core.study.record import Confirmation, TuningRecord
from bert_mlm.core.study.tuning import FINISHED, count_trials, masking_for, paired_interval, run_study, searched_values
from bert_mlm.core.train.experiment import Experiment, corpus_sequences
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """How training moved the held-out loss from the starting model's: on the domain and on the
    general text (positive: forgetting), each with its paired standard error."""

    domain: float
    domain_se: float
    general: float
    general_se: float

    @classmethod
    def mean(cls, changes: list[Change]) -> Change:
        """The seeds' mean; each error combines the masks' (the seeds' mean paired error: every seed is
        scored on the same masks) and the seeds' spread."""
        def error(name: str) -> float:
            values = [getattr(change, name) for change in changes]
            spread = variance(values) if len(values) > 1 else 0.0
            return math.sqrt(fmean(getattr(change, f"{name}_se") for change in changes) ** 2 + spread / len(values))

        return cls(fmean(c.domain for c in changes), error("domain"), fmean(c.general for c in changes),
                   error("general"))


class ContinuedScorer:
    """A trained model's :class:`Change`: scored on the domain's and the general text's evaluation
    sets, against the starting model scored once on the very same masks."""

    def __init__(self, experiment: Experiment, domain_set, general_set) -> None:
        self.sets, self.batch_size = {"domain": domain_set, "general": general_set}, experiment.evaluation.batch_size
        # model.init_from: the weights every trial starts from, on the device the trials train on
        start = experiment.new_model().to(resolve_device(experiment.training.device))
        self.before = {name: score_sequences(start, data, self.batch_size) for name, data in self.sets.items()}

    def __call__(self, model) -> Change:
        moved = {name: paired_change(score_sequences(model, data, self.batch_size), self.before[name])
                 for name, data in self.sets.items()}
        return Change(moved["domain"].loss_change, moved["domain"].loss_change_se, moved["general"].loss_change,
                      moved["general"].loss_change_se)


def general_evaluation_set(experiment: Experiment, texts: Iterable[RawText], held_out_of: tuple[dict, str] | None,
                           max_sequences: int | None):
    """The general text's evaluation set under the fixed protocol (its held-out side only when it is
    the replayed file: ``held_out_of``)."""
    rows = corpus_sequences(texts, experiment.tokenizer, experiment.sequence_config, held_out_of)
    if not rows:
        raise UserError("evaluation.corpus_path: the general text holds no text to measure forgetting on")
    ids = experiment.token_ids
    protocol = experiment.evaluation.replace(max_sequences=max_sequences or experiment.evaluation.max_sequences)
    return prepare_evaluation_set(rows, experiment.collator, ids.mask, ids.replacement, protocol)


def adopted_point(study: optuna.Study, budget: float) -> FrozenTrial | None:
    """The Pareto front's point with the largest domain gain whose forgetting stays under ``budget``."""
    within = [trial for trial in study.best_trials if trial.values[1] <= budget]
    return min(within, key=lambda trial: trial.values[0]) if within else None


def tune_continued(experiment: Experiment, config: TuningConfig, general_texts: Iterable[RawText],
                   held_out_of: tuple[dict, str] | None, sources: dict | None,
                   ) -> tuple[MaskingConfig, TrainingConfig | None, TuningRecord, optuna.Study]:
    """Run (or continue) the two-objective study; returns what :func:`tune_masking` returns, the
    record also holding ``corpus: {replay_share}`` when the study chose a share."""
    general_set = general_evaluation_set(experiment, general_texts, held_out_of, config.eval_max_sequences)
    digest = hashlib.blake2b(b"".join(row.tobytes() for row in general_set.sequences), digest_size=8).hexdigest()
    config, trial_training = trial_setup(experiment, config, {"general": digest, "sources": sources})
    domain_set = experiment.evaluation_set("valid", config.eval_max_sequences)
    scorer = ContinuedScorer(experiment, domain_set, general_set)
    configured_share = (sources or {}).get(REPLAY_SOURCE, {}).get("weight")

    def seed_changes(values: dict) -> list[Change]:
        share = values.get("replay_share")
        trained = experiment if share is None else experiment.with_mixture(with_replay_share(sources, share))
        masking = masking_for(values, experiment.masking)
        training = trial_training.replace(**{k: v for k, v in values.items() if k == "learning_rate"})
        changes = []
        for offset in range(config.seeds):
            model = trained.new_model()
            trained.train(model, training.replace(seed=training.seed + offset), masking)
            changes.append(scorer(model))
            del model
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # the next seed builds a fresh model
        return changes

    def run_trial(trial: optuna.Trial, values: dict, report: Callable) -> tuple[float, float]:
        logger.info("Trial %d: %s", trial.number, values)
        changes = seed_changes(values)
        mean = Change.mean(changes)
        trial.set_user_attr("seed_changes", [asdict(change) for change in changes])
        for name, value in asdict(mean).items():  # domain_change, domain_change_se, general_change, ...
            trial.set_user_attr(name.replace("_se", "_change_se") if name.endswith("_se") else f"{name}_change", value)
        return mean.domain, mean.general

    study = run_study(config, run_trial)
    chosen = adopted_point(study, config.forgetting_budget)
    configured = {"probability": experiment.masking.probability,
                  **({"replay_share": configured_share} if configured_share is not None else {})}
    if chosen is None:
        reason = (f"no trial of the Pareto front forgets less than tuning.forgetting_budget="
                  f"{config.forgetting_budget:g} on the general text: kept the configured setting")
        logger.info("Tuning decision: %s", reason)
        record = TuningRecord("parameters", {"probability": experiment.masking.probability},
                              study_name=config.study_name, storage=redact(config.storage), objective=config.objective,
                              finished_trials=count_trials(study, FINISHED), confirmation=Confirmation(reason=reason))
        return experiment.masking, None, record, study
    sections = searched_values(chosen.params)
    record = TuningRecord("tuning", sections["masking"], sections["training"], corpus=sections["corpus"],
                          study_name=config.study_name, storage=redact(config.storage), objective=config.objective,
                          best_trial=chosen.number,
                          best_value=chosen.values[0], best_forgetting=chosen.values[1],
                          finished_trials=count_trials(study, FINISHED))
    logger.info("Pareto front: %d trial(s); adopted point: trial %d (domain loss change %+.4f, general %+.4f)",
                len(study.best_trials), chosen.number, *chosen.values)
    if config.adopt == "if_better":
        tuned = [Change(**change) for change in chosen.user_attrs["seed_changes"]]
        record = confirm_continued(record, seed_changes(configured), tuned, config.forgetting_budget,
                                   experiment.masking)
    if record.source != "tuning":
        return experiment.masking, None, record, study
    training = experiment.training.updated(record.training) if record.training else None
    return masking_for(record.masking, experiment.masking), training, record, study


def confirm_continued(record: TuningRecord, configured: list[Change], tuned: list[Change], budget: float,
                      masking: MaskingConfig) -> TuningRecord:
    """The adopted point against the configured setting on the same seeds and masks, on both
    objectives: kept when its forgetting stays under the budget and either its domain gain is
    larger beyond seed noise (the paired 95 % interval above zero) or the configured setting's
    forgetting breaks the budget."""
    interval = paired_interval([c.domain - t.domain for c, t in zip(configured, tuned, strict=True)])
    forgetting = {"tuned": fmean(t.general for t in tuned), "configured": fmean(c.general for c in configured)}
    numbers = (f"domain loss change {interval['mean']:+.4f} better (95 % interval {interval['low']:+.4f} to "
               f"{interval['high']:+.4f}, {interval['pairs']} paired seeds); forgetting {forgetting['tuned']:+.4f} "
               f"against {forgetting['configured']:+.4f} configured, budget {budget:g}")
    within = forgetting["tuned"] <= budget
    adopted = within and (interval["low"] > 0 or forgetting["configured"] > budget)
    reason = (f"the adopted point keeps the budget and gains: {numbers}" if adopted else
              f"kept the configured setting: {numbers}")
    logger.info("Tuning confirmation: %s", reason)
    confirmation = Confirmation([t.domain for t in tuned], [c.domain for c in configured], masking.probability,
                                interval["mean"], interval["low"], interval["high"], adopted, reason,
                                tuned_forgetting=[t.general for t in tuned],
                                configured_forgetting=[c.general for c in configured])
    return record.confirmed(confirmation, masking)
