"""The tuning stage's record (``tuning_best_params``): the study's facts (best trial and score,
the paired confirmation and the decision) and where the masking a model trains with comes from.
The sections themselves are datasets of their own (``resolved_masking``, ``resolved_training``);
this record is what the training summary, ``metrics.json`` and the report say about them. Files
of earlier versions load as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from bert_mlm.config import MaskingConfig, VariantOverrides
from bert_mlm.config.corpus import with_replay_share
from bert_mlm.errors import UserError

# Where a run's masking values come from: conf/ and --params, the study's best (adopted), or a
# mask_rate_comparison variant's overrides.
SOURCES = ("parameters", "tuning", "variant")
# The study's facts, in the order the file has always listed them.
STUDY_FACTS = ("study_name", "storage", "objective", "best_trial", "best_value")


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
    # tuning.objective continued: the losses are the domain's loss changes; these the general text's
    tuned_forgetting: list[float] | None = None
    configured_forgetting: list[float] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Confirmation:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class TuningRecord:
    """``source``: where the trained masking's values come from; ``masking`` / ``training``: the
    values that source chose (the study's adopted best, a variant's overrides; the configured
    probability when the study's best was not adopted, which is then recorded as ``tuned``)."""

    source: str = "parameters"
    masking: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    corpus: dict = field(default_factory=dict)  # replay_share (tuning.objective continued)
    study_name: str | None = None
    storage: str | None = None  # the storage URL with its password masked
    objective: str | None = None
    best_trial: int | None = None
    best_value: float | None = None  # what the study minimised (eval loss, fine-tuning error, domain loss change)
    best_forgetting: float | None = None  # objective continued: the adopted point's general-text loss change
    finished_trials: int | None = None
    tuned: dict | None = None  # the study's best masking/training values, when they were not adopted
    confirmation: Confirmation | None = None
    # The run that saved this record (its version; set when the catalog loads it, never stored): a
    # model's training summary names the study it trained with, so a report can tell a later study apart.
    version: str | None = field(default=None, compare=False)

    @classmethod
    def of_parameters(cls, masking: MaskingConfig) -> TuningRecord:
        """No study (``tuning.n_trials: 0``): the configured masking."""
        return cls("parameters", {"probability": masking.probability})

    @classmethod
    def of_variant(cls, overrides: VariantOverrides) -> TuningRecord:
        return cls("variant", dict(overrides.masking), dict(overrides.training))

    def confirmed(self, confirmation: Confirmation, configured: MaskingConfig) -> TuningRecord:
        """This (tuned) record after its confirmation: adopted as it is, or else the configured
        masking kept, with the study's best recorded as ``tuned``."""
        if confirmation.adopted:
            return replace(self, confirmation=confirmation)
        tuned = {section: values for section, values in (("masking", self.masking), ("training", self.training),
                                                          ("corpus", self.corpus)) if values}
        return replace(self, source="parameters", masking={"probability": configured.probability}, training={},
                       corpus={}, tuned=tuned, confirmation=confirmation)

    @property
    def chosen(self) -> dict[str, dict]:
        """The values this record's source chose, by section (none when it is the parameters)."""
        chosen = self.source != "parameters"
        return {section: dict(getattr(self, section)) if chosen else {}
                for section in ("masking", "training", "corpus")}

    @property
    def replay_share(self) -> float | None:
        """The replay share this record chose (None: the configured one stands)."""
        return self.chosen["corpus"].get("replay_share")

    def sources(self, configured: dict | None) -> dict | None:
        """``corpus.sources`` as training draws them: with the replay share this record chose, if any."""
        return configured if self.replay_share is None else with_replay_share(configured, self.replay_share)

    @property
    def probability_source(self) -> str:
        """Where the trained mask probability came from (what the training summary says of it)."""
        return self.source if "probability" in self.chosen["masking"] else "parameters"

    @property
    def decision(self) -> str:
        """What decided the masking, in words (never empty: the report and the log print it)."""
        if self.confirmation is not None:
            return self.confirmation.reason
        if self.source == "variant":
            return "no tuning: the mask_rate_comparison variant's own masking"
        if self.study_name is None:
            return "tuning skipped (tuning.n_trials=0)"
        return "the study's best adopted as it is (tuning.adopt=always)"

    @property
    def score(self) -> dict[str, float]:
        """The best trial's score in the objective's own terms (an accuracy or entity F1, not an error)."""
        if self.best_value is None:
            return {}
        if self.objective == "continued":
            return {"best_domain_loss_change": self.best_value, "best_forgetting": self.best_forgetting}
        finetune = self.objective == "finetune"
        return {"best_finetune_score": 1.0 - self.best_value} if finetune else {"best_eval_loss": self.best_value}

    def set_aside(self, explicit: Mapping) -> list[str]:
        """One warning per value given with ``--params`` (``explicit``: their nested mapping) that
        the study's adopted best replaced."""
        lines = []
        for section, chosen in self.chosen.items():
            given = explicit.get(section) if isinstance(explicit.get(section), Mapping) else {}
            lines += [f"{section}.{key}: your --params value {given[key]!r} is set aside for {value!r} (from "
                      f"{self.source}); to train with yours, set --params tuning.n_trials=0 with the tuning stage in "
                      "the run (it then passes your values on)"
                      for key, value in chosen.items() if key in given and given[key] != value]
        return lines

    # ------------------------------------------------------------------ JSON (the catalog's file)
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TuningRecord:
        """From the stored mapping; the objective's score (``best_eval_loss`` or
        ``best_finetune_score``) is derived from ``best_value``, and unknown keys are ignored."""
        source = data.get("source", "parameters")
        if source not in SOURCES:
            raise UserError(f"tuning_best_params: source {source!r} is not one of {list(SOURCES)}")
        confirmation = data.get("confirmation")
        return cls(source, dict(data.get("masking") or {}), dict(data.get("training") or {}),
                   dict(data.get("corpus") or {}), best_forgetting=data.get("best_forgetting"),
                   **{name: data.get(name) for name in (*STUDY_FACTS, "finished_trials", "tuned")},
                   confirmation=None if confirmation is None else Confirmation.from_json(confirmation))

    def to_json(self) -> dict:
        """The file's keys in the order it has always listed them, those without a value left out."""
        data = {"masking": dict(self.masking) or None, "training": dict(self.training) or None,
                "corpus": dict(self.corpus) or None, "source": self.source,
                "tuned": self.tuned, **{name: getattr(self, name) for name in STUDY_FACTS}, **self.score,
                "finished_trials": self.finished_trials,
                "confirmation": None if self.confirmation is None else
                {key: value for key, value in asdict(self.confirmation).items() if value is not None}}
        return {key: value for key, value in data.items() if value is not None}


def check_saved_sections(record: TuningRecord, saved: dict[str, Any], configured: dict[str, Any]) -> None:
    """A run that trains without the tuning stage trains with the sections that stage saved
    (``saved``: ``masking`` and ``training``; a section it did not resolve is ``{}``): refused
    where one differs from this run's parameters (``configured``) in a value the study did not
    choose, which the run would otherwise ignore in silence."""
    for section, values in saved.items():
        if not values:
            continue
        chosen, mine = record.chosen[section], configured[section]
        for name in type(mine).model_fields:
            if name not in chosen and getattr(values, name) != getattr(mine, name):
                raise UserError(f"{section}.{name}: this run's parameters say {getattr(mine, name)!r}, but the "
                                f"training stage takes its {section} from resolved_{section}, which the tuning stage "
                                f"saved with {getattr(values, name)!r}; add the tuning stage to the run (kedro run "
                                "--pipelines tuning,training,evaluation) so that it resolves the section again")
