"""How many CPUs this process may use, and how many threads torch's intra-op pool gets.

``os.cpu_count()`` and torch's default pool see neither an affinity mask (SLURM, ``docker
--cpuset-cpus``) nor a cgroup CPU quota (``docker --cpus``, Kubernetes limits), and a pool larger
than the CPUs it gets thrashes. Stdlib only: the configuration counts CPUs without torch.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

OMP_ENV = "OMP_NUM_THREADS"
WAIT_ENV = "OMP_WAIT_POLICY"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def wait_passively() -> None:
    """OpenMP's threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``) unless the user chose
    otherwise; torch reads it when it loads, so this runs first (``bert_mlm/__init__.py``). Spinning
    threads on cores other work holds trained 10x slower (BENCHMARKS.md, "CPU threads"); the
    thread count, and so every result, stays the same."""
    if "torch" not in sys.modules:
        os.environ.setdefault(WAIT_ENV, "PASSIVE")


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, capped by its cgroup's CPU quota
    (rounded down: 1.5 CPUs of quota run one thread at full speed, two throttled)."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity masks
        count = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        count = min(count, max(1, math.floor(quota)))
    return max(1, count)


def cgroup_cpu_quota(root: Path = CGROUP_ROOT, membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """CPUs' worth of time this process's cgroup may use (quota / period), the tightest of its
    cgroup and their parents; ``None`` without a quota (or outside Linux)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: cpu.max holds "<quota> <period>" or "max <period>"
            directories = [root / path.lstrip("/"), *(root / p for p in _parents(path))]
            quotas += [_v2_quota(d / "cpu.max") for d in directories]
        elif "cpu" in controllers.split(","):  # cgroup v1: cpu.cfs_quota_us is -1 without a quota
            base = next((root / name for name in ("cpu,cpuacct", "cpu") if (root / name).is_dir()), root / "cpu")
            directories = [base / path.lstrip("/"), *(base / p for p in _parents(path))]
            quotas += [_v1_quota(d) for d in directories]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _parents(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return ["/".join(parts[:end]) for end in range(len(parts) - 1, -1, -1)]


def _v2_quota(file: Path) -> float | None:
    try:
        quota, period = file.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def intra_op_threads(setting: int | str, processes: int = 1) -> tuple[int, str]:
    """Threads for torch's intra-op pool of each of ``processes`` processes sharing this process's
    CPUs, and where the number came from: ``training.threads``; for ``auto``, ``OMP_NUM_THREADS``
    when set (every OpenMP program's convention), else the usable CPUs shared out."""
    if setting != "auto":
        return int(setting), "training.threads"
    text = os.environ.get(OMP_ENV, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text), OMP_ENV
    cpus = usable_cpus()
    return max(1, cpus // max(1, processes)), f"{cpus} usable CPU(s)" + (f" / {processes} processes"
                                                                         if processes > 1 else "")
