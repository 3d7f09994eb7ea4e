"""The end of every run: where its time went, node by node, its headline results, and where they were written."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from kedro.framework.hooks import hook_impl

from bert_mlm.core.common.files import written_then_renamed
from bert_mlm.core.common.progress import clock
from bert_mlm.core.record.results import ModelResults
from bert_mlm.hooks.plan import RunPlanHook

logger = logging.getLogger(__package__)  # one logger name for the hooks' lines: bert_mlm.hooks


NODE_TIMINGS_ENV = "BERT_MLM_NODE_TIMINGS"


def peak_rss_gb() -> float:
    """This process's peak resident memory; NaN where the ``resource`` module does not exist."""
    try:
        import resource
    except ImportError:  # Windows
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20  # bytes on macOS, KiB elsewhere


class NodeTimingHook:
    """Ends every run with a short summary that survives copy and paste: every node's time (the
    node itself, and with its catalog loads and saves: the data stages work while their datasets
    save) and peak memory, the headline metrics, and where the results were written. With
    ``BERT_MLM_NODE_TIMINGS`` set to a path, the table is also written there as JSON (the benches
    read it). Under ``ParallelRunner`` the nodes' hooks run in the workers: the table stays empty.
    """

    WRITTEN = {"run_report": "report", "trained_model": "model", "metrics": "metrics", "run_config": "run record",
               "finetune_metrics": "fine-tuning", "tuning_best_params": "study", "model_card": "model card"}

    def __init__(self, planner: RunPlanHook | None = None) -> None:
        self.planner = planner  # the run's plan: its estimate is set beside the time taken
        self.nodes: dict[str, dict] = {}
        self.started = 0.0
        self.catalog = None
        self.written: dict[str, str] = {}
        self.results: ModelResults | None = None

    def _entry(self, node) -> dict:
        return self.nodes.setdefault(node.name, {"node": node.name, "first_io": None, "last_io": None})

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        self.nodes, self.started, self.catalog, self.written, self.results = {}, time.perf_counter(), catalog, {}, None

    @hook_impl
    def before_dataset_loaded(self, dataset_name: str, node) -> None:
        entry = self._entry(node)
        entry["first_io"] = entry["first_io"] or time.perf_counter()

    @hook_impl
    def before_node_run(self, node) -> None:
        entry = self._entry(node)
        entry["node_start"] = time.perf_counter()
        entry["first_io"] = entry["first_io"] or entry["node_start"]

    @hook_impl
    def after_node_run(self, node) -> None:
        entry = self._entry(node)
        entry["node_end"] = entry["last_io"] = time.perf_counter()
        entry["peak_rss_gb"] = peak_rss_gb()

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data, node) -> None:
        self._entry(node)["last_io"] = time.perf_counter()
        if dataset_name in self.WRITTEN:
            path = self._saved_path(dataset_name, data)
            if path is not None:
                self.written[self.WRITTEN[dataset_name]] = path
        if dataset_name == "metrics":
            self.results = data

    def _saved_path(self, dataset_name: str, data=None) -> str | None:
        """Where ``data`` was written; None where nothing was (a stage that did not run)."""
        try:
            dataset = self.catalog.get(dataset_name)
            if hasattr(dataset, "written_path"):  # written into another dataset's folder (the model card)
                path = dataset.written_path(data)
                return None if path is None else str(path)
            path = str(dataset._get_versioned_path(dataset.resolve_save_version()))
        except Exception:  # noqa: BLE001 - an unversioned or unusual dataset: name it instead
            return dataset_name
        local = getattr(dataset, "_protocol", "file") == "file"
        return None if local and not Path(path).exists() else path

    @hook_impl
    def after_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        rows = [
            {
                "node": e["node"],
                "seconds": e["node_end"] - e["node_start"],
                "seconds_with_io": e["last_io"] - e["first_io"],
                "peak_rss_gb": e["peak_rss_gb"],
            }
            for e in self.nodes.values()
            if "node_end" in e
        ]
        total = time.perf_counter() - self.started
        plan = self.planner.plan if self.planner is not None else None
        estimate = plan.seconds if plan is not None else None
        for line in summary_lines(rows, total, self.results, self.written, estimate):
            logger.info("%s", line)
        target = os.environ.get(NODE_TIMINGS_ENV)
        if target:
            planned = None if plan is None else {
                "seconds": estimate, "step_seconds": plan.timing.step_seconds if plan.timing else None,
                "calibration_seconds": plan.timing.seconds if plan.timing else None,
                "stages": {stage.name: stage.seconds for stage in plan.stages}}
            with written_then_renamed(target) as temporary:
                temporary.write_text(json.dumps({"pipeline_seconds": total, "nodes": rows, "plan": planned}, indent=2))


def summary_lines(rows: list[dict], total: float, results: ModelResults | None, written: dict[str, str],
                  estimate: float | None = None) -> list[str]:
    """The end-of-run summary, one aligned line per log record."""
    width = max([len("node"), *(len(r["node"]) for r in rows)])
    planned = f" (the plan estimated {clock(estimate)} for its steps and forward passes)" if estimate else ""
    lines = [
        f"Run summary: {total:.1f} s in the pipeline{planned}",
        f"  {'node':<{width}}  {'node s':>8}  {'with I/O s':>10}  {'peak GB':>7}",
    ]
    lines += [
        f"  {r['node']:<{width}}  {r['seconds']:>8.1f}  {r['seconds_with_io']:>10.1f}  {r['peak_rss_gb']:>7.2f}"
        for r in rows
    ]
    evaluation = results.evaluation if results is not None else None
    if evaluation is not None:
        test, ratio = evaluation.test, evaluation.accuracy_over_baseline
        lines.append(f"  eval loss {test.loss:.4f}, accuracy {test.accuracy:.4f} ({ratio:.2f}x the most-frequent-token "
                     f"reference {test.baseline_accuracy or float('nan'):.4f}), {test.masked_tokens:,} masked tokens")
        lines += [f"  {sentence}" for sentence in evaluation.change_summaries]
    lines += [f"  {sentence}" for sentence in (results.plateau_sentences() if results is not None else [])]
    lines += [f"  fine-tuning{f' ({task.task})' if task.task else ''}: {task.summary}"
              for task in (results.finetune if results is not None else ())]
    label = max([0, *(len(k) for k in written)])
    lines += [f"  {name:<{label}}  {path}" for name, path in sorted(written.items())]
    return lines
