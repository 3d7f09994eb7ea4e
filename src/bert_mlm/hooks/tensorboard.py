"""TensorBoard event files while a run goes (``tracking.tensorboard: true``; docs/tracking.md)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
from kedro.framework.hooks import hook_impl

from bert_mlm.config import Section
from bert_mlm.core.common.curves import TensorBoardLog, listening
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.finetune.result import RUN_COLUMNS, RUN_SCORE, FinetuneResults
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import dotted


class TensorBoardHook:
    """With ``tracking.tensorboard: true``, one TensorBoard run per ``kedro run`` under
    ``tracking.tensorboard_dir/<run version>/`` (a variant's in a sub-folder of its name): the
    training curves at every step while training runs, the tuning trials, the evaluation, the
    fine-tuning results and per-epoch scores, and the run's parameters as text."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.logs: dict[str, TensorBoardLog] = {}
        self._listening = ExitStack()  # the training node's steps, as they are made

    def _log(self, prefix: str) -> TensorBoardLog:
        if prefix not in self.logs:
            self.logs[prefix] = TensorBoardLog(self.root / prefix if prefix else self.root)
        return self.logs[prefix]

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        self.root, self.logs = None, {}
        tracking = catalog.load("params:tracking") if catalog.exists("params:tracking") else None
        if tracking is None or not tracking.tensorboard:
            return
        version = run_params.get("run_id") or run_params.get("session_id") or time.strftime("%Y-%m-%dT%H.%M.%S")
        self.root = Path(tracking.tensorboard_dir) / str(version)
        parameters = catalog.load("parameters")
        # Each typed section's values, flattened, with secrets masked (a URL's password or signed query:
        # tuning.storage, corpus.path ...; bert_mlm.core.common.redaction.redact).
        lines = [f"| `{key}` | `{value}` |" for name, section in parameters.items() if isinstance(section, Section)
                 for key, value in redact(dotted(section.model_dump(), f"{name}.")).items()]
        self._log("").text("parameters", "| parameter | value |\n|---|---|\n" + "\n".join(lines))

    @hook_impl
    def before_node_run(self, node) -> None:
        # The training node (a variant's too): the one that makes a training history.
        if self.root is not None and any(output.rpartition(".")[2] == "training_history" for output in node.outputs):
            self._listening.enter_context(listening(self._log(node.namespace or "").records))

    @hook_impl
    def after_node_run(self, node) -> None:
        self._listening.close()

    on_node_error = after_node_run  # the same hook implementation under the error hook's name

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data) -> None:
        if self.root is None:
            return
        prefix, _, name = dataset_name.rpartition(".")
        if name == "training_history" and len(data):
            # Data-parallel ranks train in processes of their own: their steps arrive here.
            self._log(prefix).records(data.to_dict("records"))
        elif name == "tuning_trials" and len(data):
            log = self._log(prefix)
            for trial in data.to_dict("records"):
                state = str(trial.get("state", ""))
                value = trial.get("value") if state == "COMPLETE" else trial.get("last_intermediate_value")
                log.scalars({f"tuning/{state.lower() or 'trial'}_value": value}, int(trial["number"]))
        elif isinstance(data, ModelResults) and data.evaluation is not None:  # metrics.json
            test, extra = data.evaluation.test, data.evaluation.extra
            scalars = {"eval/loss": test.loss, "eval/accuracy": test.accuracy, "eval/top5_accuracy": test.top5_accuracy,
                       "eval/most_frequent_token_accuracy": test.baseline_accuracy,
                       **({} if extra is None else {"eval/extra_corpus_loss": extra.loss,
                                                    "eval/extra_corpus_accuracy": extra.accuracy})}
            self._log(prefix).scalars(scalars, data.training.train_steps if data.training is not None else 0)
        elif isinstance(data, FinetuneResults):
            log = self._log(prefix)
            for task in data:  # every number of the task's result: finetune/accuracy, finetune/gain ...
                tag = f"finetune/{task.task + '/' if task.task else ''}"
                log.scalars({f"{tag}{key}": value for key, value in task.to_json("", examples=False).items()}, 0)
                log.text(f"{tag}summary", task.summary)
        elif isinstance(data, pd.DataFrame) and set(RUN_COLUMNS) <= set(data.columns) and len(data):  # the runs
            log = self._log(prefix)
            means = data.groupby(["task", "model", "epoch"], sort=False)[RUN_SCORE].mean()
            for (task, model, epoch), score in means.items():
                log.scalars({f"finetune/{task + '/' if task else ''}{RUN_SCORE}_by_epoch/{model}": score}, int(epoch))

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._listening.close()
        for log in self.logs.values():
            log.close()
        self.logs = {}

    on_pipeline_error = after_pipeline_run
