"""The fine-tuning stage's result (``finetune_metrics``): a :class:`TaskResult` per labelled task in
a :class:`FinetuneResults`, empty where no task was fine-tuned (no version is written). A task
result holds what any task kind reports: both models' scores over the seeds, the paired gain with
its 95 % interval (:func:`interval`; one per further baseline), and the kind's other scores. Its
keys (``finetune_accuracy``, ``finetune_gain_ci_low``..., as every earlier version wrote them) are
written and read here only; more tasks go under ``finetune_tasks``. Each kind builds its result in
its own module (:mod:`.classifier`, :mod:`.tagger`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.common.statistics import Estimate, combined_interval

PRETRAINED, BASELINE = "pretrained", "baseline"  # the fine-tuned models of a task: the model, its first baseline
PREFIX = "finetune_"
# Above this share of [UNK] tokens in the labelled text, the classifier barely sees the text: a
# model of another language or script (an English vocabulary on Chinese reviews: 87 %). BERT's
# own vocabularies leave well under 1 % unknown on text of their language.
UNKNOWN_WARNING_RATE = 0.05
# The task's facts, each stored under its own name after the prefix.
FACTS = ("task", "kind", "metric", "mode", "dataset", "eval_dataset", "train_examples", "eval_examples", "classes",
         "majority_accuracy", "seeds", "epochs", "seconds", "baseline", "unknown_rate", "no_better_than_majority",
         "run", "summary")


@dataclass
class RunRow:
    """One fine-tuning run's epoch: a row of ``finetune_runs`` (epoch 0: the linear-probe head alone)."""

    model: str  # pretrained, baseline, or a further baseline's name (random)
    seed: int
    epoch: int
    train_loss: float
    scores: dict[str, float]  # the kind's eval scores by name, the headline first (a column eval_<name> each)
    learning_rate: float
    seconds: float
    data_order: str  # a digest of every batch's example indices: equal for the models of a seed
    reported: bool = False  # the epoch whose predictions the result reports

    @property
    def score(self) -> float:
        return next(iter(self.scores.values()))

    def record(self) -> dict[str, Any]:
        return {"model": self.model, "seed": self.seed, "epoch": self.epoch,
                "train_loss": self.train_loss, RUN_SCORE: self.score,
                **{f"eval_{name}": value for name, value in self.scores.items()},
                "learning_rate": self.learning_rate, "seconds": self.seconds, "data_order": self.data_order,
                "reported": self.reported}


# The runs' headline score column (accuracy, or entity F1 for a token task): what the report and TensorBoard draw.
RUN_SCORE = "eval_score"
RUN_COLUMNS = ("task", "model", "seed", "epoch", "train_loss", RUN_SCORE, "learning_rate", "seconds", "data_order",
               "reported")


def interval(per_seed, per_example) -> Estimate:
    """Mean, standard error and 95 % interval of a quantity measured per seed and per eval example
    (``per_seed``: its mean over the examples for each seed; ``per_example``: over the seeds for
    each example), the two sources of error combined (:func:`~bert_mlm.core.common.statistics.combined_interval`).
    Of a paired difference, what the two models share (data order, hard examples) cancels."""
    per_seed, per_example = np.asarray(per_seed, float), np.asarray(per_example, float)
    parts = [(float(values.var(ddof=1)) / len(values) if len(values) > 1 else 0.0, len(values) - 1)
             for values in (per_seed, per_example)]
    return replace(combined_interval(float(per_seed.mean()), parts), seeds=per_seed.tolist())


@dataclass(frozen=True)
class Comparison:
    """The task fine-tuned from a further starting point with the same seeds: its scores and the
    paired gain over it (``finetune.baseline: [auto, random]``: random's)."""

    baseline: str  # in words
    scores: dict[str, Estimate]
    gain: Estimate

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:  # as asdict() wrote it
        return cls(data["baseline"], {name: Estimate(**e) for name, e in data["scores"].items()},
                   Estimate(**data["gain"]))


@dataclass(frozen=True)
class TaskResult:
    """One labelled task fine-tuned from the model and from its starting point with the same seeds:
    scores by metric name (the headline ``metric`` first), the headline's paired ``gain``, further
    baselines (``others``), and the headline per eval example over the seeds (``example_scores``:
    what pairs two models' runs on the same examples)."""

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
    run: str | None = None  # the run that fine-tuned it (set on load)
    others: dict[str, Comparison] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)  # the kind's own facts (a token task's entity types...)

    @property
    def score(self) -> Estimate:
        return self.scores[self.metric]

    @property
    def baseline_score(self) -> Estimate | None:
        return self.baseline_scores.get(self.metric)

    @property
    def key(self) -> str:
        """What tells a model's tasks apart: the task's name, else its file's (the one unnamed task)."""
        return self.task or self.dataset or ""

    def headline(self) -> str:
        """The result in one sentence: both models' scores beside the majority class (a sequence
        task), and the gain over each baseline. Both scores: +0.8 points mean something else at 55 %
        than at 85 %."""
        metric, score, base = self.metric.replace("_", " ").replace("f1", "F1"), self.score, self.baseline_score
        reference = "strict IOB2" if self.majority_accuracy is None else f"majority class {self.majority_accuracy:.3f}"
        if base is None or self.gain is None:
            f1 = f", macro-F1 {self.scores['macro_f1'].mean:.3f}" if "macro_f1" in self.scores else ""
            return (f"fine-tuned {metric} {score.mean:.3f} ± {score.se:.3f}{f1} ({reference}; no baseline: "
                    "finetune.baseline is none)")
        sentence = (f"fine-tuned {metric} {score.mean:.3f} vs {base.mean:.3f} for {self.baseline} ({reference}): "
                    f"pretraining gained {gained(self.gain, f'{metric} points ')}")
        sentence += "".join(f", {gained(other.gain)} over {other.baseline} ({other.scores[self.metric].mean:.3f})"
                            for other in self.others.values())
        facts = f"{len(self.seeds)} seed(s), {self.eval_examples:,} eval " \
                f"{'sentences' if self.kind == 'token' else 'examples'}, {self.mode} fine-tuning"
        if "macro_f1" in self.baseline_scores:
            f1, base_f1 = self.scores["macro_f1"].mean, self.baseline_scores["macro_f1"].mean
            return sentence + f" and {f1 - base_f1:+.3f} macro-F1 (macro-F1 {f1:.3f} vs {base_f1:.3f}; {facts})"
        return f"{sentence} ({facts})"

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
        if self.others:
            data[f"{prefix}other_baselines"] = {name: asdict(other) for name, other in self.others.items()}
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
        others = {name: Comparison.from_json(other)
                  for name, other in (data.get(f"{prefix}other_baselines") or {}).items()}
        found = cls(scores=scores(""), baseline_scores=scores("baseline_"), gain=gain, others=others,
                    example_scores=list(data.get(f"{prefix}example_{metric}", ())), **{"summary": "", **facts})
        known = {*found.to_json(prefix), f"{prefix}model_version", f"{prefix}tasks"}  # the rest is the kind's detail
        return replace(found, detail={key.removeprefix(prefix): value for key, value in data.items()
                                      if key.startswith(prefix) and key not in known})


def gained(gain: Estimate, unit: str = "") -> str:
    """A gain in percentage points with its interval: ``+0.7 accuracy points [95 % CI +0.1, +1.5]``."""
    return f"{100 * gain.mean:+.1f} {unit}[95 % CI {100 * gain.low:+.1f}, {100 * gain.high:+.1f}]"


def paired_result(models: Mapping[str, dict[str, Estimate]], gains: Mapping[str, Estimate],
                  baselines: Mapping[str, str], **fields) -> TaskResult:
    """A task's result (its summary still empty) from each model's scores (:data:`PRETRAINED`'s and
    each baseline's, by name) and the paired gain over each baseline: the first baseline's gain is
    the headline's, the others are :class:`Comparison` s."""
    first, *others = list(gains) or [None]
    return TaskResult("", models[PRETRAINED], models.get(first, {}), gains.get(first),
                      baseline=baselines.get(first, "none"),
                      others={name: Comparison(baselines[name], models[name], gains[name]) for name in others},
                      **fields)


def seed_estimate(values) -> Estimate:
    """The mean of per-seed values with the seeds' standard error alone."""
    values = np.asarray(values, dtype=np.float64)
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return Estimate(float(values.mean()), se, seeds=values.tolist())


@dataclass
class ModelScores:
    """One compared model's eval predictions over the seeds (seeds x eval units: examples, or a
    token task's words) and its runs."""

    predictions: np.ndarray
    runs: list[RunRow] = field(default_factory=list)


@dataclass
class FinetuneRuns:
    """Every run of one task's fine-tuning evaluation (``runs``: a row per model, seed and epoch)
    and what they say (:meth:`task_result`): ``scores`` by model (:data:`PRETRAINED`, then each
    baseline by name), ``baselines``: each baseline's description."""

    prepared: Any  # the task, prepared for its kind (runs.PreparedTask, tagger.PreparedTagging: they import this)
    config: FinetuneConfig
    scores: dict[str, ModelScores]
    baselines: dict[str, str]
    seconds: float
    classifier: Any = None  # the first seed's fine-tuned model, when finetune.save_model keeps it
    name: str = ""  # the task's name (finetune.tasks)

    @property
    def runs(self) -> pd.DataFrame:
        rows = [{"task": self.name, **row.record()} for score in self.scores.values() for row in score.runs]
        return pd.DataFrame.from_records(rows, columns=list(dict.fromkeys(
            [*RUN_COLUMNS[:6], *(key for row in rows for key in row), *RUN_COLUMNS[6:]])))

    def task_result(self) -> TaskResult:
        """Each model's scores, the paired gains, and the sentence that says it."""
        prepared, config = self.prepared, self.config
        return prepared.result(
            self.scores, self.baselines, task=self.name, mode=config.mode, dataset=file_name(config.train_path),
            eval_dataset=file_name(config.eval_path) if config.eval_path else
            f"{file_name(config.train_path)} (hash split)", train_examples=len(prepared.train),
            eval_examples=len(prepared.evaluation), seeds=config.run_seeds, epochs=config.epochs,
            seconds=self.seconds, unknown_rate=prepared.unknown_rate)


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
            data[f"{PREFIX}tasks"] = {task.key: task.to_json("", examples) for task in others}
        return data

    def with_earlier(self, earlier: Iterable[FinetuneResults]) -> FinetuneResults:
        """These results, each task knowing its run, and the newest result of every other task that
        ``earlier`` (newest first) holds for the same model: a model's latest result of each task
        (a second run on another file adds to the first, one on the same task replaces it)."""
        tasks = [replace(task, run=task.run or self.version) for task in self.tasks]
        seen = {task.key for task in tasks}
        for found in earlier:
            if found.model_version == self.model_version:
                fresh = [replace(task, run=task.run or found.version) for task in found if task.key not in seen]
                tasks += fresh
                seen |= {task.key for task in fresh}
        return replace(self, tasks=tuple(tasks))

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
