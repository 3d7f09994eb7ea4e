"""Which model a result belongs to, and a run's results gathered for one model (``metrics.json``).

Every output of one ``kedro run`` is saved under the run's id, which is the trained model's version
(``data/06_models/masked_lm/<run id>/``). Results name the model they were made for
(``model_version``; the training summary is saved with its model) and, loaded from the catalog,
the run that saved them (``version``, attached by ``bert_mlm.datasets``; :func:`saved_in`), so that
a report never puts a result beside a model it does not belong to. A stage that did not run is
absent: ``None``, or a fine-tuning result without tasks.

The results are frozen dataclasses, not pydantic models as the configuration is: code makes them,
no user types them, so there is nothing to validate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_mlm.core.common.formatting import format_value, with_error
from bert_mlm.core.common.progress import clock
from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.train.result import TrainingSummary

# The metrics.json keys of the mask-rate comparison's table (one row per variant), in its order.
COMPARED = (
    "variant", "mask_probability", "eval_loss", "eval_loss_se", "eval_accuracy", "eval_accuracy_se",
    "eval_top5_accuracy", "baseline_accuracy", "accuracy_over_baseline", "extra_eval_accuracy",
    "extra_eval_accuracy_se", "finetune_metric", "finetune_accuracy", "finetune_accuracy_se", "finetune_macro_f1",
    "finetune_entity_f1", "finetune_entity_f1_se", "finetune_gain",
    "finetune_gain_ci_low", "finetune_gain_ci_high", "final_train_loss", "train_tokens_per_second",
)


@dataclass(frozen=True)
class ModelResults:
    """One model's results (``metrics.json``), each only where it was made for that model
    (``model_version``; None: no model yet). ``version``: the run that saved this file."""

    model_version: str | None = None
    evaluation: Evaluation | None = None
    training: TrainingSummary | None = None
    finetune: FinetuneResults = field(default_factory=FinetuneResults)
    version: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The file: the model, then every stage's keys as the stage writes them, with the runs
        that made them; the fill-mask examples last (the long part of the file)."""
        data: dict[str, Any] = {"model_version": self.model_version}
        if self.evaluation is not None:
            data.update(self.evaluation.to_json(examples=False), evaluated_in_run=self.evaluation.version)
        if self.training is not None:
            data.update(self.training.to_json())
        if self.finetune:
            data.update(self.finetune.to_json(examples=False), finetuned_in_run=self.finetune.version)
        if self.evaluation is not None:
            data["fill_mask_examples"] = self.evaluation.fill_mask_examples
        return data

    def plateau_sentences(self) -> list[str]:
        """Where the model stands against the unigram plateau (a ratio to a reference reads as progress
        even where the model fills every mask alike), and when validation left it."""
        evaluation, sentences = self.evaluation, []
        if evaluation is not None and evaluation.plateau:
            sentences.append(f"the test split: {evaluation.plateau}")
        training = self.training
        if training is not None and training.plateau_left_step is not None:
            sentences.append(f"validation left the unigram plateau at step {training.plateau_left_step:,} "
                             f"({clock(training.plateau_left_seconds or 0.0)} of training)")
        elif training is not None and training.plateau:
            sentences.append(f"validation never left the unigram plateau: {training.plateau}")
        return sentences

    @classmethod
    def from_json(cls, data: Mapping[str, Any], version: str | None = None) -> ModelResults:
        """The results in ``data`` (``metrics.json`` of this version or an earlier one)."""
        model = data.get("model_version")
        evaluation = Evaluation.from_json(data, data.get("evaluated_in_run"))
        finetune = FinetuneResults.from_json(data, data.get("finetuned_in_run"))
        return cls(model, evaluation, TrainingSummary.from_json(data, model), finetune, version)


def saved_in(data: Any) -> str | None:
    """The run (version) that saved ``data``: a result (its ``version``), or a DataFrame loaded by
    the project's CSV dataset (``attrs["version"]``); None where that is not known."""
    attrs = getattr(data, "attrs", None)
    if isinstance(attrs, dict):
        return attrs.get("version")
    version = getattr(data, "version", None)
    return version if isinstance(version, str) else None


def reported_model(run_id: str | None, evaluation: Evaluation | None, training: TrainingSummary | None,
                   finetune: FinetuneResults | None) -> str | None:
    """The model a run's results are about: the one this run trained, else evaluated, else
    fine-tuned (``kedro run --pipelines finetune`` reports the model it fine-tuned); a run that used
    none (``--pipelines reporting``, ``tuning``) reports the newest model any result names."""
    candidates = [(saved_in(result), model) for result, model in (
        (training, saved_in(training)), (evaluation, evaluation and evaluation.model_version),
        (finetune, finetune.model_version if finetune else None)) if result]
    for made_in, model in candidates:
        if run_id is not None and made_in == run_id and model:
            return model
    return max((model for _, model in candidates if model), default=None)  # the newest: Kedro versions sort as text


def collect(run_id: str | None, evaluation: Evaluation | None, training: TrainingSummary | None,
            finetune: FinetuneResults | None) -> ModelResults:
    """:func:`reported_model`'s results, each only where it belongs to that model (a result and a
    model that name no version, made in memory outside a Kedro run, belong together)."""
    model = reported_model(run_id, evaluation, training, finetune)
    return ModelResults(
        model, evaluation if evaluation is not None and evaluation.model_version == model else None,
        training if training is not None and saved_in(training) == model else None,
        finetune if finetune and finetune.model_version == model else FinetuneResults())


def evaluation_rows(evaluation: Evaluation) -> list[tuple[str, str]]:
    """The evaluation's headline numbers as labelled rows (the report's summary, the model card)."""
    test, extra = evaluation.test, evaluation.extra
    rows = [("masked-token accuracy (top-1)", with_error(test.accuracy, test.accuracy_se)),
            ("most-frequent-token reference", format_value(test.baseline_accuracy)),
            ("accuracy / reference", f"{evaluation.accuracy_over_baseline:.2f}x"),
            ("top-5 accuracy", with_error(test.top5_accuracy, test.top5_accuracy_se)),
            ("masked-token loss", with_error(test.loss, test.loss_se)),
            ("perplexity", format_value(test.perplexity))]
    if test.loss_start is not None:
        rows += [("masked-token loss of the starting model (model.init_from)",
                  with_error(test.loss_start, test.loss_start_se)),
                 ("loss change from the starting model (paired)", with_error(test.loss_change, test.loss_change_se)),
                 ("accuracy of the starting model", with_error(test.accuracy_start, test.accuracy_start_se))]
    if extra is not None:
        where = "on evaluation.corpus_path"
        rows += [(f"accuracy {where}", with_error(extra.accuracy, extra.accuracy_se)),
                 (f"reference {where}", format_value(extra.baseline_accuracy)),
                 (f"loss {where}", with_error(extra.loss, extra.loss_se))]
        if extra.loss_start is not None:
            rows += [(f"loss of the starting model {where}", with_error(extra.loss_start, extra.loss_start_se)),
                     (f"loss change {where} (paired)", with_error(extra.loss_change, extra.loss_change_se))]
    return rows
