"""What the tuning stage hands to training (``tuning_best_params``), or a mask-rate variant in its
place (``<variant>.overrides``): the masking and training values to train with, where they come
from, and the facts of the study that chose them.

One typed value, built by the study (:func:`~bert_mlm.core.tuning.best_parameters`), the
confirmation (:mod:`~bert_mlm.core.mask_study`), the skipped study (``tuning.n_trials: 0``) and a
variant, and applied once, by the training node. Stored as JSON; the file format is the one the
untyped mapping had, so results saved before this class load unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.training_config import TrainingConfig

OVERRIDABLE = ("masking", "training")  # the sections a tuning study or a variant may override
# The study's facts, in the order the file has always listed them.
STUDY_FACTS = ("study_name", "storage", "objective", "best_trial", "best_value")


class Origin(str, Enum):
    """Where a run's mask probability (and any training override) comes from."""

    PARAMETERS = "parameters"  # conf/ and --params
    TUNING = "tuning"  # the study's best, adopted
    VARIANT = "variant"  # a mask_rate_comparison variant's overrides


@dataclass(frozen=True)
class Confirmation:
    """The paired confirmation (``tuning.adopt: if_better``): the study's best against the
    configured setting on the same seeds and evaluation masks, and whether the best was adopted."""

    tuned_losses: list[float] = field(default_factory=list)
    configured_losses: list[float] = field(default_factory=list)
    configured_probability: float | None = None
    difference: float | None = None  # mean of configured - tuned, per seed
    ci_low: float | None = None
    ci_high: float | None = None
    adopted: bool = False
    reason: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Confirmation:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TuningResult:
    """The values a run trains with beyond its parameters, their origin, and the study's record.

    ``masking`` and ``training`` are applied unless the origin is the parameters: a study whose
    best was not adopted (or that was skipped) still records the configured probability it kept.
    """

    origin: Origin = Origin.PARAMETERS
    masking: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    study_name: str | None = None
    storage: str | None = None  # the storage URL with its password masked
    objective: str | None = None
    best_trial: int | None = None
    best_value: float | None = None  # what the study minimised (eval loss, or fine-tuning error)
    finished_trials: int | None = None
    tuned: dict | None = None  # the study's best masking/training values, when they were not adopted
    confirmation: Confirmation | None = None

    # ------------------------------------------------------------------ the ways one is made
    @classmethod
    def of_parameters(cls, masking: MaskingConfig) -> TuningResult:
        """No study (``tuning.n_trials: 0``): train with the configured masking."""
        return cls(Origin.PARAMETERS, {"probability": masking.probability})

    @classmethod
    def for_variant(cls, values: Mapping | None, name: str = "overrides") -> TuningResult:
        """A mask-rate variant's ``overrides`` section (``masking`` and ``training`` mappings);
        ``name``: where the section is, for the error message."""
        values = values or {}
        if not isinstance(values, Mapping):
            raise UserError(f"{name}: {values!r} must be a mapping of masking/training values")
        for section, section_values in values.items():
            if section not in OVERRIDABLE:
                raise UserError(f"{name}.{section}: only masking and training can be overridden per variant")
            if not isinstance(section_values or {}, Mapping):
                raise UserError(f"{name}.{section}: {section_values!r} must be a mapping of {section} values")
        return cls(Origin.VARIANT, dict(values.get("masking") or {}), dict(values.get("training") or {}))

    def confirmed(self, confirmation: Confirmation, configured: MaskingConfig) -> TuningResult:
        """This (tuned) result after its confirmation: adopted as it is, or else the configured
        masking kept, with the study's best recorded as ``tuned``."""
        if confirmation.adopted:
            return replace(self, confirmation=confirmation)
        tuned = {section: values for section, values in (("masking", self.masking), ("training", self.training))
                 if values}
        return replace(self, origin=Origin.PARAMETERS, masking={"probability": configured.probability}, training={},
                       tuned=tuned, confirmation=confirmation)

    # ------------------------------------------------------------------ JSON (the catalog's file)
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TuningResult:
        """From the stored mapping; the objective's score (``best_eval_loss`` or
        ``best_finetune_accuracy``) is derived from ``best_value``, and unknown keys are ignored."""
        try:
            origin = Origin(data.get("source", Origin.PARAMETERS.value))
        except ValueError as error:
            raise UserError(f"tuning_best_params: source {data.get('source')!r} is not one of "
                            f"{[o.value for o in Origin]}") from error
        confirmation = data.get("confirmation")
        return cls(
            origin, dict(data.get("masking") or {}), dict(data.get("training") or {}),
            **{name: data.get(name) for name in (*STUDY_FACTS, "finished_trials", "tuned")},
            confirmation=None if confirmation is None else Confirmation.from_json(confirmation),
        )

    def to_json(self) -> dict:
        data: dict[str, Any] = {
            **({"masking": dict(self.masking)} if self.masking else {}),
            **({"training": dict(self.training)} if self.training else {}),
            "source": self.origin.value,
        }
        if self.tuned is not None:
            data["tuned"] = self.tuned
        data.update({name: getattr(self, name) for name in STUDY_FACTS if getattr(self, name) is not None})
        data.update(self.score)
        if self.finished_trials is not None:
            data["finished_trials"] = self.finished_trials
        if self.confirmation is not None:
            data["confirmation"] = self.confirmation.to_json()
        return data

    # ------------------------------------------------------------------ what training reads
    @property
    def score(self) -> dict[str, float]:
        """The best trial's score in the objective's own terms (an accuracy, not an error)."""
        if self.best_value is None:
            return {}
        if self.objective == "finetune":
            return {"best_finetune_accuracy": 1.0 - self.best_value}
        return {"best_eval_loss": self.best_value}

    @property
    def decision(self) -> str | None:
        """The confirmation's reason, when there was one."""
        return self.confirmation.reason if self.confirmation is not None else None

    def _applied(self, section: str) -> dict:
        return {} if self.origin is Origin.PARAMETERS else getattr(self, section)

    def apply(self, masking: MaskingConfig, training: TrainingConfig) -> tuple[MaskingConfig, TrainingConfig]:
        """The configured sections with this result's values in place (re-validated)."""
        return (build_config(MaskingConfig, {**asdict(masking), **self._applied("masking")}, "masking"),
                build_config(TrainingConfig, {**asdict(training), **self._applied("training")}, "training"))

    def set_aside(self, explicit: dict) -> list[str]:
        """One warning per value the user gave explicitly (``--params``; ``explicit`` is their
        nested mapping) that this result replaces with another value."""
        lines = []
        for section in OVERRIDABLE:
            given = explicit.get(section) if isinstance(explicit.get(section), dict) else {}
            for key, value in self._applied(section).items():
                if key in given and given[key] != value:
                    keep = ("--params tuning.n_trials=0 with the tuning stage in the run (it then passes your "
                            "values on)" if self.origin is Origin.TUNING
                            else "the value in the variant's overrides in conf/")
                    lines.append(f"{section}.{key}: your --params value {given[key]!r} is set aside for {value!r} "
                                 f"(from {self.origin.value}); to train with yours, set {keep}")
        return lines

    @property
    def masking_origin(self) -> Origin:
        """Where the masking trained with comes from: this result's origin when it changes any."""
        return self.origin if self._applied("masking") else Origin.PARAMETERS

    @property
    def probability_origin(self) -> Origin:
        return self.origin if "probability" in self._applied("masking") else Origin.PARAMETERS
