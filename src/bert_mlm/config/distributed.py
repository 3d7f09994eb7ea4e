"""``distributed``: data-parallel training with torch's elastic launcher and DDP."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError


class DistributedConfig(Section):
    """Data-parallel training with torch's elastic launcher (torchrun's engine) and DDP; gloo on CPU, nccl on CUDA.
    Several machines: the same command on each, with nnodes, node_rank and a reachable rdzv_endpoint (host:port of
    node 0), and a shared checkpoint_dir"""

    SECTION = "distributed"

    nproc_per_node: int = Field(1, gt=0, description="training processes on this machine (1: no data parallelism)")
    nnodes: int = Field(1, gt=0, description="machines taking part")
    node_rank: int = Field(0, ge=0, description="this machine's number, 0 to nnodes - 1 (node 0 writes the outputs)")
    rdzv_endpoint: str = Field(
        "auto", min_length=1,
        description="host:port where the machines meet (node 0's address); auto: a free port on this machine "
                    "(one machine only: two runs never collide on a fixed port)")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, gloo on CPU")
    timeout_seconds: int = Field(600, gt=0, description="a collective that waits longer fails instead of hanging")

    @model_validator(mode="after")
    def _rank_within_nodes(self) -> DistributedConfig:
        if self.node_rank >= self.nnodes:
            raise UserError(f"distributed.node_rank: {self.node_rank!r} must be in [0, distributed.nnodes)")
        if self.rdzv_endpoint == "auto":
            if self.nnodes > 1:
                raise UserError("distributed.rdzv_endpoint: 'auto' is for one machine; with distributed.nnodes "
                                f"{self.nnodes} give node 0's host:port (the same on every machine)")
        elif not re.fullmatch(r"[^\s:]+:\d{1,5}|\[[0-9a-fA-F:.]+\]:\d{1,5}", self.rdzv_endpoint):
            raise UserError(f"distributed.rdzv_endpoint: {self.rdzv_endpoint!r} is not host:port (or auto)")
        return self

    @property
    def endpoint(self) -> str:
        """The launcher's rendezvous address: with ``auto``, port 0 on this machine (the operating system picks a
        free one, as ``torchrun --standalone`` does)."""
        return "127.0.0.1:0" if self.rdzv_endpoint == "auto" else self.rdzv_endpoint

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes
