"""Every run starts by saying what will run, each budget, and an estimate of its steps (``core.train.plan``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kedro.framework.hooks import hook_impl

from bert_mlm import run_lock
from bert_mlm.core.common.device import resolve_device, resolve_precision
from bert_mlm.core.data.engine import close_engines
from bert_mlm.core.train.plan import STEP_STAGES, Plan, measure_step, plan_run
from bert_mlm.cpus import WAIT_ENV, usable_cpus
from bert_mlm.errors import UserError, first_line
from bert_mlm.hooks.threads import ThreadsHook
from bert_mlm.hooks.validation import ValidateParametersHook, validate_parameters

logger = logging.getLogger(__package__)  # one logger name for the hooks' lines: bert_mlm.hooks
IMPLAUSIBLE_SECONDS = 365 * 86400  # a stage the plan estimates longer than a year is refused


class RunPlanHook:
    """Starts every run with its plan (``core.train.plan``). Registered first in ``settings.HOOKS``,
    so that pluggy calls it after the parameters, the inputs and the run lock are checked: a run
    that is refused spends nothing on measuring."""

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
    """The chain's stages ``pipeline`` runs nodes of (not counting the reporting nodes registered
    with each), in order, and how many mask-rate variants it trains."""
    from bert_mlm.pipeline_registry import CHAIN

    names = {node.name for node in pipeline.nodes}
    stages = [name for name, module in CHAIN.items() if names & {node.name for node in module.create_pipeline().nodes}]
    variants = len({node.namespace.split(".")[0] for node in pipeline.nodes
                    if node.namespace and node.name.endswith(".train_masked_lm")})
    if variants:
        stages.append("mask_rate_comparison")
    return stages, variants
