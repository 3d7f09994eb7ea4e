"""Project hooks: validate every parameter section before any node does expensive work, and
report where a run's time went, node by node."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path

import torch
from kedro.framework.hooks import hook_impl

from bert_mlm import run_lock
from bert_mlm.config import ExperimentConfig
from bert_mlm.config.finetune import BASELINES
from bert_mlm.core.common.device import resolve_device, resolve_precision
from bert_mlm.core.common.files import remove_dead_temporaries, remove_empty_versions, written_then_renamed
from bert_mlm.core.common.progress import clock
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.engine import close_engines
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.finetune.runs import load_labelled
from bert_mlm.core.model.bert import (
    check_starting_tokenizer,
    check_starting_vocabulary,
    check_step_memory_early,
    open_model,
    planned_bert_config,
)
from bert_mlm.core.model.checkpoints import check_checkpoint_dir, checkpoint_bytes
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import describe_device, run_facts
from bert_mlm.core.study.record import check_saved_sections
from bert_mlm.core.study.tuning import check_storage
from bert_mlm.core.train.experiment import check_extra_corpus
from bert_mlm.core.train.plan import STEP_STAGES, Plan, measure_step, plan_run
from bert_mlm.cpus import WAIT_ENV, intra_op_threads, usable_cpus
from bert_mlm.errors import UserError, first_line
from bert_mlm.kedro_checks import (
    check_credentials,
    check_inputs_written,
    check_load_versions,
    check_no_globals_file,
    described_run,
)

logger = logging.getLogger(__name__)


def validate_parameters(parameters: dict) -> ExperimentConfig:
    """The run's typed configuration; raises one clear ``UserError`` naming the first bad
    parameter, its value and what is allowed, before any data is read: the values, the starting
    model's files, the memory of a step and the checkpoint folder."""
    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    config = ExperimentConfig.from_parameters(parameters, variants=VARIANTS)
    source_settings(config.corpus.sources)  # a mixture's weights: one line now, not at the training node
    if config.model.init_from:  # a missing or broken checkpoint fails here, before the data stages
        open_model(config.model.init_from, "model.init_from")
        tokenizer = config.tokenizer
        if tokenizer.vocab_path:
            check_starting_vocabulary(config.model.init_from, tokenizer.vocab_path, tokenizer.lowercase,
                                      tokenizer.strip_accents, tokenizer.chinese_chars)
        else:
            check_starting_tokenizer(config.model.init_from, tokenizer.lowercase, tokenizer.strip_accents,
                                     tokenizer.chinese_chars)
    for task in config.finetune.task_configs().values():
        for baseline in set(task.baselines) - set(BASELINES):
            open_model(baseline, "finetune.baseline")
    device = resolve_device(config.training.device)
    precision = resolve_precision(config.training.precision, device)
    planned = planned_bert_config(config.model, config.tokenizer.vocab_size, config.tokenizer.extend_vocabulary)
    # Before the data stages: a step that cannot fit is otherwise killed by the OOM killer, silently.
    # How many sequences a step holds is known once they are counted: core.train.loop checks it exactly.
    deferred = check_step_memory_early(planned, config.training.batch_size, config.sequences.max_length, device,
                                       precision,
                                       processes=config.distributed.nproc_per_node if device.type == "cpu" else 1)
    if deferred:
        logger.warning("%s", deferred)
    training = config.training
    if training.checkpoint_dir and (training.checkpoint_every or training.resume):
        check_checkpoint_dir(training.checkpoint_dir, checkpoint_bytes(planned, training.keep_best))
    return config


def check_saved_tuning(config: ExperimentConfig, catalog) -> None:
    """A run that trains without the tuning stage takes the sections that stage saved: refused
    before any work where there are none, or where they disagree with this run's parameters."""
    if not catalog.exists("resolved_masking"):
        raise UserError(
            "resolved_masking: no saved version; the tuning stage saves the masking that training takes (the "
            "tuning_best_params.json of earlier versions holds the study's record only): add the tuning stage to "
            "the run (kedro run --pipelines tuning,training,evaluation; with tuning.n_trials=0 it passes the "
            "configured masking on)"
        )
    saved = {"masking": catalog.load("resolved_masking"), "training": catalog.load("resolved_training")}
    check_saved_sections(catalog.load("tuning_best_params"), saved,
                         {"masking": config.masking, "training": config.training})


class ValidateParametersHook:
    """Validates every section once, then takes the project's run lock (one run at a time: runs in
    one project would load each other's dataset versions) until the run ends.

    Nodes declare the typed sections they take (``training: TrainingConfig``) and Kedro builds
    them from ``params:<section>`` when it creates the catalog (``kedro.validation``). This hook
    runs before that, on the raw parameters, so that a bad value gets this project's one-line
    message (unknown keys with a suggestion, true/false refused as a number) instead of Kedro's,
    and hands Kedro the sections it built: pydantic takes an instance of the model as it is, so
    each section is validated once.
    """

    def __init__(self) -> None:
        self.config: ExperimentConfig | None = None

    @hook_impl
    def after_context_created(self, context) -> None:
        parameters = context.config_loader["parameters"]
        self.config = validate_parameters(parameters)
        context.config_loader["parameters"] = {**parameters, **self.config.parameters()}
        check_no_globals_file(context.config_loader.conf_source, context.env)
        check_credentials(context.config_loader["catalog"], _section(context.config_loader, "credentials"),
                          context.env)

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        from kedro.framework.project import pipelines

        config = self.config or validate_parameters(catalog.load("parameters"))
        check_load_versions(catalog, run_params.get("load_versions"))
        check_inputs_written(pipeline, catalog, pipelines, described_run(run_params))
        tuning, names = config.tuning, {node.name.split(".")[-1] for node in pipeline.nodes}
        if tuning.n_trials > 0 and "tune_mask_probability" in names:
            check_storage(tuning)
        finetune_tuning = tuning.n_trials > 0 and tuning.objective == "finetune" and "tune_mask_probability" in names
        if "finetune_classifier" in names or finetune_tuning:  # a bad labelled file fails here, before any training
            for name, task in config.finetune.task_configs().items():
                load_labelled(task, name)
        if "extra_eval_corpus" in pipeline.all_inputs():  # a bad evaluation.corpus_path too
            check_extra_corpus(catalog.load("extra_eval_corpus"))
        nodes = {node.name for node in pipeline.nodes}  # the default chain's, not a variant's namespaced nodes
        if "train_masked_lm" in nodes and "tune_mask_probability" not in nodes:
            check_saved_tuning(config, catalog)
        project = Path(run_params.get("project_path") or Path.cwd())
        run_lock.acquire(project)
        self.started = time.time() - 1  # file times are coarser than the clock on some file systems
        remove_dead_temporaries(project / "data")  # under the lock: no other run of this project writes there

        self.explicit = run_params.get("runtime_params") or {}
        # What no node can know, for the run record (record_run) and the results' model (gather_metrics).
        # Saved into the catalog's memory dataset (assigning would replace it, with Kedro's warning).
        catalog.save("run_facts", run_facts(run_params, config.model_dump(mode="json"),
                                            (node.name for node in pipeline.nodes),
                                            describe_device(resolve_device(config.training.device))))

    @hook_impl
    def after_node_run(self, node, outputs: dict) -> None:
        # The study's adopted best replaces masking/training values: say so when the user had set
        # one of them explicitly.
        if node.name == "tune_mask_probability" and getattr(self, "explicit", None):
            for line in outputs["tuning_best_params"].set_aside(self.explicit):
                logger.warning("%s", line)

    @hook_impl
    def after_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        close_engines()
        run_lock.release(run_params.get("project_path") or Path.cwd())

    @hook_impl
    def on_pipeline_error(self, error, run_params: dict, pipeline, catalog) -> None:
        project = Path(run_params.get("project_path") or Path.cwd())
        close_engines()
        if getattr(self, "started", None) is not None:
            remove_empty_versions(project / "data", self.started)
        run_lock.release(project)


class ThreadsHook:
    """Sets torch's CPU threads for the run (``training.threads``: the CPUs this process may use,
    shared among data-parallel processes; ``cpus.intra_op_threads``) before anything is timed or run.
    Registered after the plan's hook, so that pluggy (last registered, first called) calls it first."""

    def __init__(self, validated: ValidateParametersHook) -> None:
        self.validated = validated
        self.threads, self.source = 1, ""

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        config = self.validated.config or validate_parameters(catalog.load("parameters"))
        device = resolve_device(config.training.device)
        processes = config.distributed.nproc_per_node if device.type == "cpu" else 1
        self.threads, self.source = intra_op_threads(config.training.threads, processes)
        torch.set_num_threads(self.threads)


IMPLAUSIBLE_SECONDS = 365 * 86400  # a stage the plan estimates longer than a year is refused


class RunPlanHook:
    """Starts every run by saying what will run: the stages, each budget, and an estimate of the
    training steps and forward passes from a step measured here and now (``core.train.plan``).
    Registered first in ``settings.HOOKS``, so that pluggy calls it after the parameters, the inputs
    and the run lock are checked: a run that is refused spends nothing on measuring."""

    def __init__(self, validated: ValidateParametersHook, threads: ThreadsHook) -> None:
        self.plan: Plan | None = None
        self.validated, self.threads = validated, threads

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        config = self.validated.config or validate_parameters(catalog.load("parameters"))
        device = resolve_device(config.training.device)
        stages, variants = planned_stages(pipeline)
        timing = None
        if any(stage in STEP_STAGES for stage in stages):
            try:
                timing = measure_step(config, device)
            except Exception as error:  # noqa: BLE001 - an estimate never stops a run (the run reports its own errors)
                logger.warning("Plan: no estimate of the training steps: measuring one failed (%s)", first_line(error))
        self.plan = plan_run(stages, config, timing, variants)
        for line in self.plan.lines():
            logger.info("%s", line)
        beyond = [stage for stage in self.plan.stages if (stage.seconds or 0) > IMPLAUSIBLE_SECONDS]
        if beyond:  # training.max_steps=10**21 once planned ~2x10^15 hours and trained until killed
            close_engines()  # Kedro calls no on_pipeline_error for a hook's error: give back what the run took
            run_lock.release(run_params.get("project_path") or Path.cwd())
            raise UserError(f"{beyond[0].name}: {beyond[0].budget} would take ~{beyond[0].seconds / 86400:,.0f} days "
                            f"on this machine (a training step measured at {timing.step_seconds:.3g} s): beyond any "
                            "plausible run; lower the budget (training.max_steps, tuning.n_trials, ...)")
        waits = os.environ.get(WAIT_ENV, "").upper() or "unset: threads spin while they wait"
        facts = f"{device}, {resolve_precision(config.training.precision, device)}, {self.threads.threads} torch " \
                f"thread(s) ({self.threads.source}), {WAIT_ENV} {waits}"
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        if load > usable_cpus() and self.threads.threads > 1 and device.type == "cpu":
            facts += (f"; load {load:.1f} on {usable_cpus()} usable CPU(s): other work slows this run, and threads "
                      "wait on each other (training.threads=1 can be faster now; docs/gpu-and-performance.md)")
        logger.info("Plan: %s", facts)


def planned_stages(pipeline) -> tuple[list[str], int]:
    """The stages of the chain that ``pipeline`` runs nodes of, in the chain's order (each stage
    by its own nodes: not the reporting nodes registered with it), and how many mask-rate variants
    it trains."""
    from bert_mlm.pipeline_registry import CHAIN

    names = {node.name for node in pipeline.nodes}
    stages = [name for name, module in CHAIN.items() if names & {node.name for node in module.create_pipeline().nodes}]
    variants = len({node.namespace.split(".")[0] for node in pipeline.nodes
                    if node.namespace and node.name.endswith(".train_masked_lm")})
    if variants:
        stages.append("mask_rate_comparison")
    return stages, variants


def _section(config_loader, key: str) -> dict:
    """The credentials Kedro reads for this environment; {} where there is no credentials file."""
    from kedro.config import MissingConfigException

    try:
        return dict(config_loader[key] or {})
    except (MissingConfigException, KeyError):
        return {}


class RedactedForPlugins:
    """Plugins see no secret: kedro-mlflow logs every node's parameters and tags the MLflow run
    with the run's parameters (``--params corpus.path=https://user:PASSWORD@...`` among them).
    These wrappers hand every other implementation of the two hooks redacted copies
    (:func:`bert_mlm.core.common.redaction.redact`; typed sections as plain mappings, which kedro-mlflow
    flattens into ``training.batch_size`` ...) and put the real values back before Kedro uses them."""

    @hook_impl(hookwrapper=True)
    def before_pipeline_run(self, run_params: dict):
        original = dict(run_params)
        run_params.update(redact(original))
        try:
            yield
        finally:
            run_params.clear()
            run_params.update(original)

    @hook_impl(hookwrapper=True)
    def before_node_run(self, inputs: dict):
        original = {name: value for name, value in inputs.items() if name.startswith("params:") or name == "parameters"}
        inputs.update({name: redact(plain_settings(value)) for name, value in original.items()})
        try:
            yield
        finally:
            inputs.update(original)


def plain_settings(value):
    """A typed section (a dataclass, or a pydantic model) as the plain mapping it was built from."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


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
    """Ends every run with a short summary that survives copy and paste: a table of every node's
    time (the node function itself, and with its catalog loads and saves: the data stages do
    their work while their datasets save) and the process's peak memory when it finished, the
    headline metrics, and where the results were written (report, model, metrics, run record, study,
    fine-tuning result).

    With the environment variable ``BERT_MLM_NODE_TIMINGS`` set to a path, the table is also
    written there as JSON (``bench/end_to_end.py`` uses it). Under ``ParallelRunner`` nodes run
    in worker processes that hold their own hook instances, so the table stays empty there.
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
    """The end-of-run summary, one aligned line per log record: the node table, the reported
    model's headline results, and where the results were written."""
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
    lines += [f"  fine-tuning{f' ({task.task})' if task.task else ''}: {task.summary}"
              for task in (results.finetune if results is not None else ())]
    label = max([0, *(len(k) for k in written)])
    lines += [f"  {name:<{label}}  {path}" for name, path in sorted(written.items())]
    return lines
