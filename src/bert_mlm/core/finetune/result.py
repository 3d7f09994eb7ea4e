"""The fine-tuning stage's result (``finetune_metrics``): a :class:`TaskResult` per labelled task in
a :class:`FinetuneResults`, empty where no task was fine-tuned (no ``finetune.train_path``: no
version is written). A task result holds what any task kind reports: its name, its kind
(``sequence``; ``token`` has entity F1 for headline), the headline metric's name, both models'
scores over the seeds, the paired gain with its 95 % interval, and the kind's other scores
(macro-F1). Its keys (``finetune_accuracy``, ``finetune_seed_accuracy``, ``finetune_gain_ci_low``...,
as every earlier version wrote them) are written and read here only; more tasks go under
``finetune_tasks``.

The interval of a mean over seeds and eval examples combines two sources of error: the seeds
(between-seed variance of the per-seed means) and the sampling of the eval examples
(between-example variance of the per-example means over seeds). For a paired difference both are
taken of the differences, so what the two models share (data order, hard examples) cancels.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.common.statistics import combined_interval
from bert_mlm.core.finetune.labelled import Task

logger = logging.getLogger(__name__)

PRETRAINED, BASELINE = "pretrained", "baseline"  # the two fine-tuned models of a task
PREFIX = "finetune_"
# Above this share of [UNK] tokens in the labelled text, the classifier barely sees the text: a
# model of another language or script (an English vocabulary on Chinese reviews: 87 %). BERT's
# own vocabularies leave well under 1 % unknown on text of their language.
UNKNOWN_WARNING_RATE = 0.05
# The task's facts, each stored under its own name after the prefix.
FACTS = ("task", "kind", "metric", "mode", "dataset", "eval_dataset", "train_examples", "eval_examples", "classes",
         "majority_accuracy", "seeds", "epochs", "seconds", "baseline", "unknown_rate", "no_better_than_majority",
         "summary")


@dataclass
class RunRow:
    """One fine-tuning run's epoch: a row of ``finetune_runs`` (epoch 0: the linear-probe head alone)."""

    model: str  # pretrained or baseline
    seed: int
    epoch: int
    train_loss: float
    eval_accuracy: float
    eval_macro_f1: float
    learning_rate: float
    seconds: float
    data_order: str  # a digest of every batch's example indices: equal for the two models of a seed
    reported: bool = False  # the epoch whose predictions the result reports


RUN_COLUMNS = tuple(f.name for f in fields(RunRow))
RUN_SCORE = "eval_accuracy"  # the runs' score column: what the report and TensorBoard draw per epoch


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error (None: not recorded) and its 95 % interval; a model's score
    over the seeds holds each seed's too."""

    mean: float
    se: float | None = None
    low: float | None = None
    high: float | None = None
    seeds: list[float] = field(default_factory=list)


def interval(per_seed, per_example, confidence: float = 0.95) -> Estimate:
    """Mean, standard error and ``confidence`` interval of a quantity measured per seed and per
    eval example (:func:`~bert_mlm.core.common.statistics.combined_interval` of the two sources of
    error): ``per_seed`` holds its mean over the examples for each seed, ``per_example`` its mean
    over the seeds for each example."""
    per_seed, per_example = np.asarray(per_seed, float), np.asarray(per_example, float)
    parts = [(float(values.var(ddof=1)) / len(values) if len(values) > 1 else 0.0, len(values) - 1)
             for values in (per_seed, per_example)]
    found = combined_interval(float(per_seed.mean()), parts, confidence)
    return Estimate(found.mean, found.se, found.low, found.high, per_seed.tolist())


def points(value: float) -> str:
    """A share as signed percentage points: ``+0.7``."""
    return f"{100 * value:+.1f}"


@dataclass(frozen=True)
class TaskResult:
    """One labelled task fine-tuned from the model and from its starting point with the same seeds.
    ``scores`` / ``baseline_scores``: by metric name (the headline ``metric`` first; a sequence task's
    ``macro_f1`` too); ``gain``: the headline's paired difference; ``example_scores``: the headline
    per eval example, averaged over the seeds (what pairs two models' runs on the same examples)."""

    summary: str
    scores: dict[str, Estimate]
    baseline_scores: dict[str, Estimate] = field(default_factory=dict)
    gain: Estimate | None = None
    example_scores: list[float] = field(default_factory=list)
    task: str = ""  # the task's name ("": the one task of finetune.train_path)
    kind: str = "sequence"  # sequence or token classification
    metric: str = "accuracy"
    mode: str | None = None
    dataset: str | None = None  # the labelled file's name
    eval_dataset: str | None = None
    train_examples: int | None = None
    eval_examples: int | None = None
    classes: int | None = None
    majority_accuracy: float | None = None  # always answering the most frequent training label
    seeds: list[int] = field(default_factory=list)
    epochs: int | None = None
    seconds: float | None = None
    baseline: str | None = None  # the starting point, in words
    unknown_rate: float | None = None  # share of the labelled text's tokens that are [UNK]
    no_better_than_majority: bool = False
    detail: dict[str, Any] = field(default_factory=dict)  # the kind's own facts (a token task's entity types...)

    @property
    def score(self) -> Estimate:
        return self.scores[self.metric]

    @property
    def baseline_score(self) -> Estimate | None:
        return self.baseline_scores.get(self.metric)

    def headline(self) -> str:
        """The result in one sentence: both models' scores beside the majority class, and the gain.
        Both scores: +0.8 points mean something else at 55 % than at 85 %."""
        metric, score, base = self.metric.replace("_", " "), self.score, self.baseline_score
        majority = f"majority class {self.majority_accuracy:.3f}"
        if base is None or self.gain is None:
            f1 = f", macro-F1 {self.scores['macro_f1'].mean:.3f}" if "macro_f1" in self.scores else ""
            return (f"fine-tuned {metric} {score.mean:.3f} ± {score.se:.3f}{f1} ({majority}; no baseline: "
                    "finetune.baseline is none)")
        gain = self.gain
        sentence = (f"fine-tuned {metric} {score.mean:.3f} vs {base.mean:.3f} for {self.baseline} ({majority}): "
                    f"pretraining gained {points(gain.mean)} {metric} points [95 % CI {points(gain.low)}, "
                    f"{points(gain.high)}]")
        if "macro_f1" in self.baseline_scores:
            f1, base_f1 = self.scores["macro_f1"].mean, self.baseline_scores["macro_f1"].mean
            sentence += f" and {f1 - base_f1:+.3f} macro-F1 (macro-F1 {f1:.3f} vs {base_f1:.3f}"
        else:
            sentence += " ("
        return sentence + f"; {len(self.seeds)} seed(s), {self.eval_examples:,} eval examples, {self.mode} fine-tuning)"

    def to_json(self, prefix: str = PREFIX, examples: bool = True) -> dict[str, Any]:
        """The task's keys; ``examples``: with the per-example scores (``metrics.json`` leaves them out)."""
        data = {f"{prefix}{name}": getattr(self, name) for name in FACTS}
        for which, scores in (("", self.scores), ("baseline_", self.baseline_scores)):
            for name, estimate in scores.items():
                data.update({f"{prefix}{which}{name}": estimate.mean, f"{prefix}{which}{name}_se": estimate.se,
                             f"{prefix}{which}seed_{name}": estimate.seeds})
        if self.gain is not None:
            data.update({f"{prefix}gain": self.gain.mean, f"{prefix}gain_se": self.gain.se,
                         f"{prefix}gain_ci_low": self.gain.low, f"{prefix}gain_ci_high": self.gain.high})
        data.update({f"{prefix}{name}_gain": self.scores[name].mean - baseline.mean
                     for name, baseline in self.baseline_scores.items() if name != self.metric})
        if examples:
            data[f"{prefix}example_{self.metric}"] = self.example_scores
        return {**{f"{prefix}{key}": value for key, value in self.detail.items()}, **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], prefix: str = PREFIX) -> TaskResult:
        metric = data.get(f"{prefix}metric") or "accuracy"
        names = sorted((key.removeprefix(f"{prefix}seed_") for key in data if key.startswith(f"{prefix}seed_")),
                       key=lambda name: name != metric)

        def scores(which: str) -> dict[str, Estimate]:
            return {name: Estimate(data[key], data.get(f"{key}_se"),
                                   seeds=list(data.get(f"{prefix}{which}seed_{name}", ())))
                    for name in names if (key := f"{prefix}{which}{name}") in data}

        gain = Estimate(*(data.get(f"{prefix}{key}") for key in ("gain", "gain_se", "gain_ci_low", "gain_ci_high"))) \
            if f"{prefix}gain" in data else None
        facts = {name: data[f"{prefix}{name}"] for name in FACTS if data.get(f"{prefix}{name}") is not None}
        found = cls(scores=scores(""), baseline_scores=scores("baseline_"), gain=gain,
                    example_scores=list(data.get(f"{prefix}example_{metric}", ())), **{"summary": "", **facts})
        known = {*found.to_json(prefix), f"{prefix}model_version", f"{prefix}tasks"}  # the rest is the kind's detail
        return replace(found, detail={key.removeprefix(prefix): value for key, value in data.items()
                                      if key.startswith(prefix) and key not in known})


def macro_f1(labels: np.ndarray, predictions: np.ndarray, classes: int) -> float:
    from sklearn.metrics import f1_score  # imported when used: SciPy and scikit-learn weigh ~50 MB

    return float(f1_score(labels, predictions, labels=list(range(classes)), average="macro", zero_division=0))


@dataclass
class ModelScores:
    """One compared model's eval predictions over the seeds (seeds x examples) and its runs."""

    predictions: np.ndarray
    runs: list[RunRow] = field(default_factory=list)

    def correct(self, labels: np.ndarray) -> np.ndarray:
        return (self.predictions == labels[None, :]).astype(np.float64)

    def estimates(self, labels: np.ndarray, classes: int) -> dict[str, Estimate]:
        """Accuracy (its error from the seeds and the examples: :func:`interval`) and macro-F1 (from the seeds)."""
        correct = self.correct(labels)
        f1 = np.asarray([macro_f1(labels, row, classes) for row in self.predictions])
        f1_se = float(f1.std(ddof=1) / math.sqrt(len(f1))) if len(f1) > 1 else 0.0
        return {"accuracy": interval(correct.mean(1), correct.mean(0)),
                "macro_f1": Estimate(float(f1.mean()), f1_se, seeds=f1.tolist())}


def sequence_result(scores: Mapping[str, ModelScores], labels: np.ndarray, task: Task, baseline: str, *,
                    warning_rate: float, **facts) -> TaskResult:
    """A sequence classification task's result from its models' predictions (``scores``: the
    pretrained model's and, paired, its baseline's), with the sentence that says it, warning where
    the model is no better than the majority class or barely sees the text (``unknown_rate`` above
    ``warning_rate``). ``facts``: the task's other :data:`FACTS`."""
    majority = task.label_ids[task.train["label"].mode().iloc[0]]
    majority_rate = float((labels == majority).mean())
    correct = scores[PRETRAINED].correct(labels)
    accuracy = interval(correct.mean(1), correct.mean(0))
    difference = correct - scores[BASELINE].correct(labels) if BASELINE in scores else None
    result = TaskResult("", scores[PRETRAINED].estimates(labels, len(task.labels)),
                        scores[BASELINE].estimates(labels, len(task.labels)) if BASELINE in scores else {},
                        None if difference is None else interval(difference.mean(1), difference.mean(0)),
                        correct.mean(0).tolist(), eval_examples=len(labels), classes=len(task.labels),
                        majority_accuracy=majority_rate, baseline=baseline,
                        no_better_than_majority=bool(accuracy.low <= majority_rate), **facts)
    cautions = []
    if result.no_better_than_majority:
        label = task.labels[majority]
        cautions.append(
            f"the fine-tuned model is no better than always answering {label!r} ({majority_rate:.4f} of the eval "
            "examples)" if accuracy.mean <= majority_rate else
            f"the fine-tuned model is not distinguishable from always answering {label!r} ({majority_rate:.4f} of "
            f"the eval examples lies inside its 95 % CI {accuracy.low:.4f}-{accuracy.high:.4f})")
        logger.warning("finetune: %s", cautions[-1])
    if (result.unknown_rate or 0.0) > warning_rate:  # logged, at length, when the task was prepared
        cautions.append(f"{100 * result.unknown_rate:.0f} % of the labelled text's tokens are unknown to the model's "
                        "vocabulary")
    return replace(result, summary=result.headline() + "".join(f"; WARNING: {caution}" for caution in cautions))


@dataclass
class FinetuneRuns:
    """Every run of one fine-tuning evaluation (``runs``: a row per model, seed and epoch) and what
    they say (:meth:`task_result`)."""

    prepared: Any  # the task, encoded (bert_mlm.core.finetune.runs.PreparedTask, which imports this module)
    config: FinetuneConfig
    scores: dict[str, ModelScores]
    baseline: str
    seconds: float
    classifier: Any = None  # the first seed's fine-tuned classifier, when finetune.save_model keeps it

    @property
    def runs(self) -> pd.DataFrame:
        return pd.DataFrame.from_records([asdict(row) for score in self.scores.values() for row in score.runs],
                                         columns=RUN_COLUMNS)

    def task_result(self) -> TaskResult:
        """The pretrained model's and its starting point's scores, the paired gain, and the sentence that says it."""
        prepared, config = self.prepared, self.config
        return sequence_result(self.scores, prepared.evaluation.labels, prepared.task, self.baseline, mode=config.mode,
                               dataset=file_name(config.train_path),
                               eval_dataset=file_name(config.eval_path) if config.eval_path else
                               f"{file_name(config.train_path)} (hash split)", train_examples=len(prepared.train),
                               seeds=config.run_seeds, epochs=config.epochs, seconds=self.seconds,
                               unknown_rate=prepared.unknown_rate, warning_rate=UNKNOWN_WARNING_RATE)


def file_name(path) -> str:
    """A labelled file as results name it: its file name, never a local folder or a URL's credentials."""
    return PurePosixPath(str(path).split("?")[0].rstrip("/")).name or "?"


@dataclass(frozen=True)
class FinetuneResults:
    """The fine-tuning results of one run: a result per task (none where no task was fine-tuned),
    and the model fine-tuned (``model_version``). ``version``: the run that saved it (set on load)."""

    tasks: tuple[TaskResult, ...] = ()
    model_version: str | None = None
    version: str | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[TaskResult]:
        return iter(self.tasks)

    def to_json(self, examples: bool = True) -> dict[str, Any]:
        """The first task's keys as every earlier version wrote them (``finetune_accuracy``), the
        others' under ``finetune_tasks`` by name; ``examples``: as :meth:`TaskResult.to_json`."""
        if not self.tasks:
            return {}
        first, *others = self.tasks
        data = {f"{PREFIX}model_version": self.model_version, **first.to_json(PREFIX, examples)}
        if others:
            data[f"{PREFIX}tasks"] = {task.task: task.to_json("", examples) for task in others}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], version: str | None = None) -> FinetuneResults:
        """The results in ``data`` (a ``metrics.json`` too); empty where it holds none."""
        if f"{PREFIX}summary" not in data:
            return cls(version=version)
        others = (TaskResult.from_json(task, "") for task in (data.get(f"{PREFIX}tasks") or {}).values())
        return cls((TaskResult.from_json(data), *others), data.get(f"{PREFIX}model_version"), version)


def paired_differences(results: Mapping[str, TaskResult], reference: str) -> pd.DataFrame:
    """Each model's fine-tuned headline score against ``reference``'s (mask-rate variants fine-tuned
    with the same seeds, data order and eval examples), paired, with the interval of :func:`interval`."""
    base = results[reference]
    rows = []
    for name, result in results.items():
        if name == reference:
            continue
        found = interval(np.subtract(result.score.seeds, base.score.seeds),
                         np.subtract(result.example_scores, base.example_scores))
        rows.append({"variant": name, "reference": reference, "finetune_difference": found.mean,
                     "finetune_difference_ci_low": found.low, "finetune_difference_ci_high": found.high})
    return pd.DataFrame(rows)
