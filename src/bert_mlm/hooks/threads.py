"""torch's CPU threads for the whole run, set before anything is timed or run."""

from __future__ import annotations

import torch
from kedro.framework.hooks import hook_impl

from bert_mlm.core.common.device import resolve_device
from bert_mlm.cpus import intra_op_threads
from bert_mlm.hooks.validation import ValidateParametersHook, validate_parameters


class ThreadsHook:
    """Sets torch's CPU threads for the run (``cpus.intra_op_threads``). Registered after the plan's
    hook, so that pluggy (last registered, first called) calls it first."""

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
