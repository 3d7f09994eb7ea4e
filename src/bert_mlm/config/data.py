"""``data``: where the data stages (ingestion, encoding) run their parallel work."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.cpus import usable_cpus
from bert_mlm.errors import UserError

ENGINES = ("local", "dask")


class DataConfig(Section):
    """Where the data stages (ingestion, encoding) run their parallel work"""

    SECTION = "data"

    engine: Literal[ENGINES] = Field("local", description="local: this machine's cores | dask: dask.distributed tasks")
    workers: int | None = Field(
        None, ge=1, description="worker processes (local cleaning pool, or a LocalCluster's workers); null: all cores")
    scheduler_address: str | None = Field(
        None, description="with engine: dask, a running scheduler (tcp://host:8786); null starts a LocalCluster")
    in_flight_per_worker: int = Field(
        2, ge=1, description="chunks (~2 MB of text each) queued per worker: bounds memory")
    # 2 MB, measured against 8 MB on 64 copies of each corpus (BENCHMARKS "Chinese data path"): the data
    # stages' whole process tree peaked at 988-989 vs 1,103-1,104 MiB (Chinese) and 717-731 vs
    # 942-956 MiB (Gutenberg), in the same or less time (Chinese 64.9-67.2 vs 67.2-68.3 s, English
    # 101.9-102.2 vs 104.1-104.8 s; two runs each, alternating).
    chunk_bytes: int = Field(
        2 << 20, ge=1 << 16,
        description="text per work item (a read chunk, a shard row group): memory vs per-task overhead")
    reuse: bool = Field(
        True, description="skip a data stage whose inputs, settings and code match a stored version (logged; hard "
                          "links); false: recompute")

    @model_validator(mode="after")
    def _scheduler_needs_dask(self) -> DataConfig:
        if self.scheduler_address is not None and self.engine != "dask":
            raise UserError("data.scheduler_address: set data.engine=dask to use a Dask scheduler")
        return self

    @property
    def worker_count(self) -> int:
        """``workers``, or the CPUs this process may use (its affinity mask and cgroup quota; the
        machine's core count overcommits a container or a SLURM job)."""
        return self.workers or usable_cpus()
