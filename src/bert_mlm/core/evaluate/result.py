"""The fixed-protocol evaluation's result: what a model scored on each held-out set, typed; its
JSON keys are named here only (:meth:`HeldOut.key`: ``eval_loss``, ``extra_eval_loss`` for the
extra corpus), as every earlier version named them, so their files load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# The three scores of a held-out set, each with its standard error (and, for continued
# pretraining, the starting model's and the paired change).
MEASURES = ("loss", "accuracy", "top5_accuracy")
# The unigram plateau: a model that fills every mask with the most frequent tokens. It is off the
# plateau when its accuracy passes 1.2x the most-frequent-token reference (the time-to-quality
# benchmark's threshold) and fewer than 80 % of its top-1 predictions are among the 10 most frequent
# training tokens: a Chinese model at 2.39x the reference still filled every mask with ，的。国.
PLATEAU_RATIO, PLATEAU_SHARE, FREQUENT_TOKENS = 1.2, 0.8, 10


def off_plateau(accuracy: float | None, reference: float | None, frequent_share: float | None) -> bool | None:
    """Whether a model has left the unigram plateau (None: not measured)."""
    if accuracy is None or reference is None or frequent_share is None:
        return None
    return accuracy >= PLATEAU_RATIO * reference and frequent_share < PLATEAU_SHARE


def plateau_numbers(accuracy: float, reference: float, frequent_share: float) -> str:
    return (f"{accuracy / max(reference, 1e-12):.2f}x the reference accuracy, {frequent_share:.0%} of predictions "
            f"among the {FREQUENT_TOKENS} most frequent tokens")


def plateau_sentence(accuracy: float, reference: float, frequent_share: float) -> str:
    """Where a model stands against the unigram plateau, in one sentence."""
    numbers = plateau_numbers(accuracy, reference, frequent_share)
    if off_plateau(accuracy, reference, frequent_share):
        return f"off the unigram plateau ({numbers})"
    return (f"still on the unigram plateau: it fills masks with the most frequent tokens ({numbers}); train "
            "longer or faster (docs/training.md)")


@dataclass(frozen=True)
class HeldOut:
    """One held-out set scored under the fixed protocol, and what it rests on; with a starting model,
    its scores on the very same masks (``*_start``) and the paired change (``*_change``), also in
    one sentence. (Files of earlier versions may lack the errors and counts: None, 0.)"""

    loss: float
    accuracy: float
    loss_se: float | None = None
    accuracy_se: float | None = None
    top5_accuracy: float | None = None
    top5_accuracy_se: float | None = None
    perplexity: float | None = None
    masked_tokens: int = 0
    sequences: int = 0  # the distinct held-out sequences scored
    mask_draws: int = 0  # draws begun (the last may be partial)
    held_out_sequences: int | None = None  # the sequences the set held
    baseline_accuracy: float | None = None  # always predicting the training split's most frequent token
    frequent_share: float | None = None  # top-1 predictions among the 10 most frequent training tokens
    loss_start: float | None = None
    loss_start_se: float | None = None
    loss_change: float | None = None
    loss_change_se: float | None = None
    accuracy_start: float | None = None
    accuracy_start_se: float | None = None
    accuracy_change: float | None = None
    accuracy_change_se: float | None = None
    top5_accuracy_start: float | None = None
    top5_accuracy_start_se: float | None = None
    top5_accuracy_change: float | None = None
    top5_accuracy_change_se: float | None = None
    change_summary: str | None = None

    def standing(self) -> str | None:
        """On or off the unigram plateau, in a phrase for a validation's log line (None: not measured)."""
        reference, share = self.baseline_accuracy, self.frequent_share
        if reference is None or share is None:
            return None
        return (f"{'off' if off_plateau(self.accuracy, reference, share) else 'on'} the unigram plateau "
                f"({plateau_numbers(self.accuracy, reference, share)})")

    @staticmethod
    def key(name: str, prefix: str = "") -> str:
        """A field's key in the JSON files: ``eval_loss``, ``extra_eval_loss``, ``baseline_accuracy``."""
        return f"{prefix}{'' if name == 'baseline_accuracy' else 'eval_'}{name}"

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        return {self.key(f.name, prefix): value for f in fields(self) if (value := getattr(self, f.name)) is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], prefix: str = "") -> HeldOut | None:
        """The set's scores, or None where ``data`` holds none (no extra corpus)."""
        if cls.key("loss", prefix) not in data:
            return None
        return cls(**{f.name: data[key] for f in fields(cls) if (key := cls.key(f.name, prefix)) in data})


@dataclass(frozen=True)
class Evaluation:
    """A model's fixed-protocol evaluation (``evaluation_metrics``): the test split (``test``), the
    extra corpus (``extra``, with ``evaluation.corpus_path``), the most-frequent-token reference's
    token, the protocol's settings, fill-mask examples, and the model it was made for
    (``model_version``). ``version``: the run that saved it (set on load, never stored)."""

    test: HeldOut
    baseline_token: str
    mask_probability: float
    seed: int
    whole_word: bool = False
    split: str = "test"
    extra: HeldOut | None = None
    extra_corpus_path: str | None = None  # redacted: a setting
    model_version: str | None = None
    fill_mask_examples: list[dict] = field(default_factory=list)
    version: str | None = field(default=None, compare=False)

    @property
    def accuracy_over_baseline(self) -> float:
        return self.test.accuracy / max(self.test.baseline_accuracy or 0.0, 1e-12)

    @property
    def plateau(self) -> str | None:
        """The test split's score against the unigram plateau in a sentence (None: not measured)."""
        test = self.test
        if test.frequent_share is None or test.baseline_accuracy is None:
            return None
        return plateau_sentence(test.accuracy, test.baseline_accuracy, test.frequent_share)

    @property
    def change_summaries(self) -> list[str]:
        """The before/after sentences of continued pretraining (none from scratch)."""
        return [held.change_summary for held in (self.test, self.extra) if held is not None and held.change_summary]

    def to_json(self, examples: bool = True) -> dict[str, Any]:
        data = {**self.test.to_json(), "baseline_token": self.baseline_token,
                "accuracy_over_baseline": self.accuracy_over_baseline, "eval_split": self.split,
                "eval_mask_probability": self.mask_probability, "eval_seed": self.seed,
                "eval_whole_word": self.whole_word, "model_version": self.model_version}
        if self.extra is not None:
            data.update(self.extra.to_json("extra_"), extra_corpus_path=self.extra_corpus_path)
        if examples:
            data["fill_mask_examples"] = self.fill_mask_examples
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], version: str | None = None) -> Evaluation | None:
        test = HeldOut.from_json(data)
        if test is None:
            return None
        return cls(test, data.get("baseline_token", "?"), data.get("eval_mask_probability", 0.15),
                   data.get("eval_seed", 0), data.get("eval_whole_word", False), data.get("eval_split", "test"),
                   HeldOut.from_json(data, "extra_"), data.get("extra_corpus_path"), data.get("model_version"),
                   list(data.get("fill_mask_examples") or ()), version)
