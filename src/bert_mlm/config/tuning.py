"""``tuning``: the Optuna study over the masking (and optionally the learning rate)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from bert_mlm.config.base import Section
from bert_mlm.config.masking import SCHEDULES, SPANS
from bert_mlm.errors import UserError

# name -> (section, how it is sampled: a float range, a log-scale range, or a list of choices)
SEARCHABLE = {
    "probability": ("masking", "range"),
    "mask_token_fraction": ("masking", "range"),
    "random_token_fraction": ("masking", "range"),
    "whole_word": ("masking", "choice"),  # e.g. [false, true]
    "schedule": ("masking", "choice"),  # e.g. [constant, linear]
    "span": ("masking", "choice"),  # e.g. [none, ngram]
    "final_probability": ("masking", "range"),  # the end of a linear schedule
    "learning_rate": ("training", "log"),
    "replay_share": ("corpus", "range"),  # corpus.replay's share of each training epoch
}
CHOICES = {
    "whole_word": (lambda value: isinstance(value, bool), "[false, true]"),
    "schedule": (lambda value: value in SCHEDULES, "[constant, linear]"),
    "span": (lambda value: value in SPANS, "[none, ngram, geometric]"),
}
PROBABILITIES = ("probability", "final_probability", "replay_share")
SAMPLERS = ("qmc", "tpe", "random")
ADOPT = ("if_better", "always")
# eval_loss: fixed-protocol masked-LM loss on the validation split | finetune: 1 - the trial
# model's mean fine-tuning score (accuracy, entity F1) on the finetune task(s) (what pretraining is for; slower) |
# continued: two objectives for continued pretraining, the domain's and the general text's loss changes
OBJECTIVES = ("eval_loss", "finetune", "continued")
PRUNERS = ("median", "hyperband", "none")


class TuningConfig(Section):
    """The Optuna study over the masking (and, when asked, the learning rate)"""

    SECTION = "tuning"

    n_trials: int = Field(3, ge=0, description="finished trials the study should hold in total; 0 skips tuning")
    trial_steps: int = Field(30, gt=0, description="optimizer steps per trial")
    eval_every: int = Field(15, gt=0, description="steps between fixed-protocol evaluations (and pruning checks)")
    search_space: dict[str, list[Any]] = Field(
        default_factory=lambda: {"probability": [0.10, 0.40]},
        description=f"name: [low, high] (or a list of choices) for any of {', '.join(SEARCHABLE)}")
    storage: str = Field(
        "sqlite:///data/07_model_output/tuning/optuna.db", min_length=1,
        description="an Optuna storage URL: sqlite:///..., postgresql://..., or journal:<file>")
    study_name: str = Field(
        "mask-probability", min_length=1,
        description="the study's name; a fingerprint of the data, model and budget is appended")
    sampler: Literal[SAMPLERS] = Field("qmc", description="qmc | tpe | random")
    pruner: Literal[PRUNERS] = Field("median", description="median | hyperband | none")
    seed: int = Field(0, ge=0, description="the sampler's seed")
    heartbeat_interval: int = Field(
        30, gt=0, description="seconds between a running trial's heartbeats (a killed worker's trial is failed)")
    grace_period: int = Field(90, gt=0, description="seconds without a heartbeat before a trial counts as failed")
    eval_max_sequences: int | None = Field(
        None, gt=0, description="validation sequences each trial is scored on (null: the protocol's)")
    seeds: int = Field(
        2, ge=1, description="training seeds per trial (the score is their mean; each trial records their spread)")
    adopt: Literal[ADOPT] = Field(
        "if_better", description="if_better: train at the tuned setting only when a paired confirmation (same "
                                 "seeds, same masks) puts the 95 % interval of its gain above zero; always: take "
                                 "the study's best")
    objective: Literal[OBJECTIVES] = Field(
        "eval_loss", description="eval_loss: the fixed-protocol loss on the valid split | finetune: the fine-tuning "
                                 "error (1 - accuracy, or 1 - entity F1 for a token task) on finetune's task (set "
                                 "finetune.train_path) | continued: with model.init_from, the domain's loss change "
                                 "and the general text's (evaluation.corpus_path) both minimised; the study keeps "
                                 "the Pareto front and adopts by tuning.forgetting_budget")
    forgetting_budget: float = Field(
        0.05, ge=0, description="objective continued: the rise of the general text's loss (nats) the adopted setting "
                                "may cost; 0.05 is 5 % more perplexity on it")
    finetune_task: str = Field(
        "mean", min_length=1, description="objective finetune with several finetune.tasks: the task whose error the "
                                          "study minimises | mean: the mean of every task's error")

    @field_validator("search_space")
    @classmethod
    def _searchable(cls, space: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not space:
            raise UserError("tuning.search_space: must name at least one parameter")
        for name, bounds in space.items():
            if name not in SEARCHABLE:
                raise UserError(f"tuning.search_space: {name!r} is not one of {sorted(SEARCHABLE)}")
            if SEARCHABLE[name][1] == "choice":
                allowed, example = CHOICES[name]
                if not (bounds and all(allowed(b) for b in bounds)):
                    raise UserError(f"tuning.search_space.{name}: {bounds!r} must be a list of choices, e.g. {example}")
                continue
            numbers = all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            # A replay share may start at 0 (no replay); a rate or a probability may not.
            low_ok = bounds[0] >= 0 if name == "replay_share" else bounds[0] > 0
            if not (numbers and len(bounds) == 2 and low_ok and bounds[0] < bounds[1]):
                relation = "0 <= low < high" if name == "replay_share" else "0 < low < high"
                raise UserError(f"tuning.search_space.{name}: {bounds!r} must be [low, high] with {relation}")
            if name in PROBABILITIES and not bounds[1] < 1:
                raise UserError(f"tuning.search_space.{name}: {bounds!r} must lie in the open interval (0, 1)")
        return space
