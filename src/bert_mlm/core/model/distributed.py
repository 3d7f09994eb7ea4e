"""Data-parallel training on PyTorch's elastic launcher (``torchrun``'s) and ``DistributedDataParallel``.

The Kedro node stays one process; :func:`launch` runs a function on ``nproc_per_node`` workers here
(joining ``nnodes`` machines through a c10d rendezvous) and returns rank 0's result. Backend:
``gloo`` on CPU, ``nccl`` on CUDA. A failing worker fails the launch with its error
(``max_restarts=0``), and collectives time out instead of hanging.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from bert_mlm.config import DistributedConfig
from bert_mlm.core.common.state_codec import from_bytes, to_bytes


@dataclass(frozen=True)
class Rank:
    """Where this process stands: ``Rank(0, 1)`` is a plain single-process run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


SINGLE = Rank()


def _worker(function: Callable[..., Any], args: tuple, backend: str, timeout_seconds: int) -> Any:
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_seconds))
    try:
        return function(*args, rank=Rank(dist.get_rank(), dist.get_world_size(), local_rank))
    finally:
        dist.destroy_process_group()


def launch(config: DistributedConfig, function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function(*args, rank=Rank(...))`` on every worker; return rank 0's result."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # CPU workers fork from Python's fork server, which imported the project once where the caller preloads it
    # (Kedro's settings do: bert_mlm/forkserver.py); spawned, each imported torch, transformers and the experiment
    # again (~4 s). A forked worker starts in the launcher's folder with torchelastic's variables, the rest of its
    # environment the server's (set when it started). GPU workers (and Windows, which has no fork server) spawn:
    # a CUDA context made in the server by any import would break every forked worker.
    backend = config.backend if config.backend != "auto" else "nccl" if torch.cuda.is_available() else "gloo"
    forks = backend == "gloo" and "forkserver" in multiprocessing.get_all_start_methods()
    launch_config = LaunchConfig(
        min_nodes=config.nnodes, max_nodes=config.nnodes, nproc_per_node=config.nproc_per_node, rdzv_backend="c10d",
        rdzv_endpoint=config.endpoint, rdzv_configs={"rank": config.node_rank, "timeout": config.timeout_seconds},
        run_id="bert-mlm", max_restarts=0, monitor_interval=0.5, start_method="forkserver" if forks else "spawn")
    results = elastic_launch(launch_config, _worker)(function, args, backend, config.timeout_seconds)
    return results.get(0) if isinstance(results, dict) else results


def all_reduce_sum(values: list[float], rank: Rank, device: torch.device) -> list[float]:
    if not rank.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def gather_objects(obj: Any, rank: Rank) -> list[Any]:
    """``obj`` (dicts, lists, numbers, tensors, arrays) from every rank, in rank order.

    Sent as safetensors bytes, not as pickles (torch's object collectives): what arrives from
    the network is decoded as data, never run."""
    if not rank.distributed:
        return [obj]
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    payload = torch.frombuffer(bytearray(to_bytes(obj)), dtype=torch.uint8).to(device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(rank.world_size)]
    dist.all_gather(sizes, torch.tensor([payload.numel()], dtype=torch.int64, device=device))
    longest = int(max(size.item() for size in sizes))
    gathered = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(rank.world_size)]
    dist.all_gather(gathered, torch.nn.functional.pad(payload, (0, longest - payload.numel())))
    return [from_bytes(data[: int(size.item())].cpu().numpy().tobytes()) for data, size in zip(gathered, sizes,
                                                                                                 strict=True)]
