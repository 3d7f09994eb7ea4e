"""Which model a result belongs to, and a run's results gathered for one model (``metrics.json``).

Every output of one ``kedro run`` is saved under the same version, the run's id: the trained model
of the run ``2026-05-01T10.00.00.000Z`` lies in ``data/06_models/masked_lm/2026-05-01T10.00.00.000Z/``,
and that id is the model's version. Results name the model they were made for: the evaluation
(``model_version``), the fine-tuning (``finetune_model_version``) and the training summary (saved
with its model, so its own version). A result loaded from the catalog knows the run that saved it
(:func:`saved_in`), so that a report never puts a fine-tuning result or a study beside a model it
does not belong to, and says so.

Kedro-free: the datasets (``bert_mlm.datasets``) attach the versions on load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Saved(dict):
    """A record (a JSON object) as loaded from the catalog, with ``version``: the run that saved it
    (its version folder), or None where that is not known (a record made in memory)."""

    def __init__(self, data: Mapping | None = None, version: str | None = None) -> None:
        super().__init__(data or {})
        self.version = version

    def __reduce__(self):
        return (Saved, (dict(self), self.version))


class _NotRun:
    """What a node returns for an output it did not produce this run (the fine-tuning stage
    without ``finetune.train_path``): the project's datasets write no version for it, so the
    newest version stays the last real result."""

    _instance: _NotRun | None = None

    def __new__(cls) -> _NotRun:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_NotRun, ())

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_RUN"


NOT_RUN = _NotRun()

# Keys of earlier versions' records, and what they are called now.
RENAMED = {"parameters": "parameter_count"}


def saved_in(data: Any) -> str | None:
    """The run (version) that saved ``data``: a :class:`Saved` record, a DataFrame loaded by the
    project's CSV dataset (``attrs["version"]``), a loaded model or tuning record (``version``)."""
    attrs = getattr(data, "attrs", None)
    if isinstance(attrs, dict):
        return attrs.get("version")
    version = getattr(data, "version", None)
    return version if isinstance(version, str) else None


def with_current_names(record: Mapping) -> dict:
    """``record`` with the keys of earlier versions renamed (``parameters``, the parameter count,
    is ``parameter_count``)."""
    return {RENAMED.get(key, key) if isinstance(value, int) else key: value for key, value in record.items()}


def newest(*versions: str | None) -> str | None:
    """The newest of Kedro versions (timestamps that sort as text); None without any."""
    known = [version for version in versions if version]
    return max(known) if known else None


def reported_model(run_id: str | None, evaluation: Mapping, training: Mapping, finetune: Mapping) -> str | None:
    """The model a run's results are about: the one this run trained, else evaluated, else
    fine-tuned (``kedro run --pipelines finetune`` reports the model it fine-tuned); a run that used
    none (``--pipelines reporting``, ``tuning``) reports the newest model any result names."""
    candidates = (
        (saved_in(training), saved_in(training)),
        (saved_in(evaluation), evaluation.get("model_version")),
        (saved_in(finetune), finetune.get("finetune_model_version")),
    )
    for made_in, model in candidates:
        if run_id is not None and made_in == run_id and model:
            return model
    return newest(*(model for _, model in candidates))


def belongs(result_model: str | None, model: str | None) -> bool:
    """Whether a result made for ``result_model`` belongs to ``model``; a result and a model that
    name no version (made in memory, outside a Kedro run) belong together."""
    return result_model == model


def collect_metrics(run_id: str | None, evaluation: Mapping, training: Mapping, finetune: Mapping,
                    for_metrics: Any = dict) -> dict:
    """One model's results in one mapping (``metrics.json``): the fixed-protocol evaluation, the
    training summary and the fine-tuning evaluation of :func:`reported_model`, each only where it
    belongs to that model, with the runs that made them. ``for_metrics``: what of the fine-tuning
    result the file takes."""
    model = reported_model(run_id, evaluation, training, finetune)
    metrics: dict[str, Any] = {"model_version": model}
    examples = None
    if evaluation and belongs(evaluation.get("model_version"), model):
        metrics.update({k: v for k, v in evaluation.items() if k != "fill_mask_examples"})
        metrics["evaluated_in_run"] = saved_in(evaluation)
        examples = evaluation.get("fill_mask_examples")
    if training and belongs(saved_in(training), model):
        metrics.update(with_current_names(training))
    if finetune and belongs(finetune.get("finetune_model_version"), model):
        metrics.update(for_metrics(finetune))
        metrics["finetuned_in_run"] = saved_in(finetune)
    if examples is not None:
        metrics["fill_mask_examples"] = examples  # last: the long part of the file
    return metrics
