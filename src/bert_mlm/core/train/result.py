"""The training stage's result (``training_summary``), typed: its fields are the keys of
``training_summary.json`` and ``metrics.json`` (:meth:`TrainingSummary.to_json`, ``from_json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pandas as pd

from bert_mlm.config import MaskingConfig
from bert_mlm.core.evaluate.result import off_plateau, plateau_sentence
from bert_mlm.core.train.loop import TrainingResult

# The training history's validation columns: the loop writes them on the steps it validated.
VALID_LOSS, VALID_ACCURACY, VALID_TOKENS, VALID_SECONDS = "valid_loss", "valid_accuracy", "valid_masked_tokens", \
    "valid_seconds"
# Keys of earlier versions' files, and what they are called now; the decisions their null stood for.
RENAMED = {"parameters": "parameter_count"}
DECISIONS = {"parameters": "tuning skipped (tuning.n_trials=0)",
             "tuning": "the study's best adopted as it is (tuning.adopt=always)"}
# Present only where the run validated (training.eval_every) or kept its best step.
VALIDATION = ("valid_seconds", "valid_share", "valid_masked_tokens", "final_valid_loss", "best_valid_loss",
              "best_valid_step", "kept_valid_loss", "plateau_left_step", "plateau_left_seconds", "plateau")


@dataclass(frozen=True)
class TrainingSummary:
    """Tokens, speed, the masking actually used and where its probability came from (the tuning
    stage's record: ``mask_probability_source``, ``tuning_decision``, and the study's run,
    ``tuning_run``), and validation during training: how often, what it cost, and which step's
    weights the model holds (``kept_step``). ``version``: the run that saved it, the model's own
    version (set on load, never stored)."""

    train_tokens: int = 0
    train_seconds: float = 0.0
    train_tokens_per_second: float = 0.0
    train_steps: int = 0
    final_train_loss: float | None = None
    device: str | None = None
    precision: str | None = None
    resumed_from_step: int | None = None
    mask_probability: float | None = None
    mask_schedule: str | None = None
    final_mask_probability: float | None = None
    mask_token_fraction: float | None = None
    random_token_fraction: float | None = None
    whole_word: bool | None = None
    word_segmenter: str | None = None
    mask_probability_source: str | None = None  # parameters, tuning or variant
    learning_rate: float | None = None
    learning_rate_schedule: str | None = None  # where the learning rate and warmup came from
    tuning_decision: str | None = None
    parameter_count: int | None = None
    tuning_run: str | None = None  # the study (tuning_best_params version) the masking came from
    data_parallel_workers: int | None = None
    mixture: dict | None = None  # a mixture's per-source share of epoch 0
    eval_every: int = 0
    kept_step: int | None = None
    keep_best: bool = False
    valid_seconds: float | None = None
    valid_share: float | None = None  # of training and validation time
    valid_masked_tokens: int | None = None
    final_valid_loss: float | None = None
    best_valid_loss: float | None = None
    best_valid_step: int | None = None
    kept_valid_loss: float | None = None
    # The first validated step off the unigram plateau, its training seconds, and the last validation's
    # standing in a sentence (core.evaluate.result.plateau_sentence).
    plateau_left_step: int | None = None
    plateau_left_seconds: float | None = None
    plateau: str | None = None
    version: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, result: TrainingResult, masking: MaskingConfig, *, probability_source: str, decision: str,
           tuning_run: str | None, parameter_count: int, word_segmenter: str, world_size: int,
           mixture: dict | None = None, eval_every: int | None = 0, schedule_note: str = "") -> TrainingSummary:
        """The summary of ``result``: ``masking`` as trained (``word_segmenter``: the sequence
        index's, which ``masking.word_segmenter: auto`` resolved to)."""
        history = result.history
        validated = validated_steps(history)
        last_step = int(history["step"].max()) if len(history) else 0
        validation: dict[str, Any] = {}
        if len(validated):
            seconds, losses = float(validated[VALID_SECONDS].sum()), validated[VALID_LOSS]
            validation = dict(valid_seconds=seconds, valid_share=seconds / max(seconds + result.seconds, 1e-12),
                              valid_masked_tokens=int(validated[VALID_TOKENS].iloc[-1]),
                              final_valid_loss=float(losses.iloc[-1]), best_valid_loss=float(losses.min()),
                              best_valid_step=int(validated.loc[losses.idxmin(), "step"]),
                              **plateau_steps(history, validated))
        return cls(
            train_tokens=result.train_tokens, train_seconds=result.seconds,
            train_tokens_per_second=result.tokens_per_second, train_steps=last_step,
            final_train_loss=float(history["loss"].tail(20).mean()) if len(history) else None,
            device=result.device, precision=result.precision, resumed_from_step=result.resumed_from_step,
            mask_probability=masking.probability, mask_schedule=masking.schedule,
            final_mask_probability=masking.final_probability if masking.schedule == "linear" else masking.probability,
            mask_token_fraction=masking.mask_token_fraction, random_token_fraction=masking.random_token_fraction,
            whole_word=masking.whole_word,
            word_segmenter=word_segmenter if masking.word_segmenter == "auto" else masking.word_segmenter,
            mask_probability_source=probability_source, learning_rate=result.learning_rate,
            learning_rate_schedule=schedule_note, tuning_decision=decision, parameter_count=parameter_count,
            tuning_run=tuning_run, data_parallel_workers=world_size, mixture=mixture, eval_every=eval_every or 0,
            kept_step=result.kept_step or last_step, keep_best=result.kept_step is not None,
            kept_valid_loss=result.kept_valid_loss, **validation)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["version"]
        return {key: value for key, value in data.items() if key not in VALIDATION or value is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], version: str | None = None) -> TrainingSummary | None:
        """The summary in ``data`` (a ``metrics.json`` too), None where it holds none."""
        data = {RENAMED.get(key, key): value for key, value in data.items()}
        found = {f.name: data[f.name] for f in fields(cls) if f.name in data and f.name != "version"}
        if found and not found.get("tuning_decision"):
            found["tuning_decision"] = DECISIONS.get(found.get("mask_probability_source"))
        return cls(**found, version=version) if found else None


def plateau_steps(history: pd.DataFrame, validated: pd.DataFrame) -> dict[str, Any]:
    """When validation first left the unigram plateau (step, and training seconds up to it), and
    where the last validation stands; nothing where the history lacks the plateau's measures."""
    rows = list(validated.reindex(columns=["step", VALID_ACCURACY, "valid_baseline_accuracy", "valid_frequent_share"])
                .dropna().itertuples(index=False, name=None))
    if not rows:
        return {}
    left = next((step for step, *scores in rows if off_plateau(*scores)), None)
    found: dict[str, Any] = {"plateau": plateau_sentence(*rows[-1][1:])}
    if left is not None:
        found.update(plateau_left_step=int(left),
                     plateau_left_seconds=float(history.loc[history["step"] <= left, "seconds"].sum()))
    return found


def validated_steps(history: pd.DataFrame) -> pd.DataFrame:
    """The history's rows of the steps the run validated (none where it never did)."""
    return history.dropna(subset=[VALID_LOSS]) if VALID_LOSS in history else history.iloc[:0]
