"""What every benchmark here shares: alternate the systems, take medians, print ratio tables,
describe the machine and measure its fp32 matmul peak.

This VM is noisy (CPU steal moves a plain matmul between ~30 and ~180 GFLOP/s within a day), so
systems are never timed one after the other: each repeat runs every system once, in turn, and
the table reports medians and ratios to a reference.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def alternate(systems: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds of each call, ``repeats`` rounds, every round running each system once."""
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(repeats):
        for name, run in systems.items():
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def alternate_rates(systems: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Like :func:`alternate` for systems that measure themselves and return a rate."""
    rates: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(repeats):
        for name, run in systems.items():
            rates[name].append(float(run()))
    return rates


def median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass
class Table:
    """A Markdown table with a title, the command that reproduces it and notes."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += [""] + [f"{note}" for note in self.notes] + ([""] if self.notes else [])
        return "\n".join(lines)


def rate_table(
    title: str, rates: dict[str, list[float]], reference: str, unit: str, notes: list[str] | None = None,
    higher_is_better: bool = True,
) -> Table:
    """Rows: system, median rate, min-max, ratio to ``reference`` (how many times faster)."""
    table = Table(title, ["system", f"median {unit}", "range", f"vs {reference}"], notes=list(notes or []))
    base = median(rates[reference])
    for name, values in rates.items():
        value = median(values)
        ratio = value / base if higher_is_better else base / value
        table.rows.append(
            [
                name,
                f"{value:,.2f}" if value < 100 else f"{value:,.0f}",
                f"{min(values):,.4g}–{max(values):,.4g}",
                f"**{ratio:.2f}x**" if name != reference else "1.00x",
            ]
        )
    table.data = {"rates": rates, "reference": reference, "unit": unit}
    return table


def fp32_matmul_peak(sizes: tuple[int, ...] = (1024, 2048, 3072), repeats: int = 5) -> float:
    """GFLOP/s of the fastest square fp32 matmul size (median over repeats), with torch's threads."""
    import torch

    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm-up: MKL picks its kernels, pages are touched
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - started)
        best = max(best, 2 * n**3 / median(times) / 1e9)
    return best


def machine_info() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(memory, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "load_average": os.getloadavg(),
        "platform": platform.platform(),
    }


def run_measured(
    command: list[str], cwd: str | None = None, env: dict | None = None, sample_seconds: float = 0.25
) -> dict:
    """Wall seconds and memory of ``command`` and its descendants.

    ``peak_rss_gb``: the largest resident set of any one process (what ``/usr/bin/time -v``
    reports). ``peak_pss_gb``: the peak of the whole process tree's proportional set size, sampled
    every ``sample_seconds`` (shared pages counted once: worker pools are not double-counted);
    ``peak_rss_tree_gb``: the peak of the tree's summed resident sets (shared pages counted in each).
    A fresh Python wrapper runs the command, so that ``RUSAGE_CHILDREN`` holds only its peak.
    """
    wrapper = (
        "import json, resource, subprocess, sys, time, psutil\n"
        "started = time.perf_counter()\n"
        "process = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "import threading\n"
        "tail = []\n"
        "reader = threading.Thread(target=lambda: tail.append(process.stderr.read()), daemon=True)\n"
        "reader.start()\n"
        "peak = peak_rss = 0\n"
        "root = psutil.Process(process.pid)\n"
        "while process.poll() is None:\n"
        "    total = rss = 0\n"
        "    try:\n"
        "        for p in [root, *root.children(recursive=True)]:\n"
        "            try:\n"
        "                info = p.memory_full_info()\n"
        "                total += info.pss\n"
        "                rss += info.rss\n"
        "            except (psutil.NoSuchProcess, psutil.AccessDenied):\n"
        "                pass\n"
        "    except psutil.NoSuchProcess:\n"
        "        pass\n"
        "    peak = max(peak, total)\n"
        "    peak_rss = max(peak_rss, rss)\n"
        "    time.sleep(float(sys.argv[1]))\n"
        "reader.join()\n"
        "print(json.dumps({'seconds': time.perf_counter() - started, 'returncode': process.returncode,\n"
        "    'peak_rss_gb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,\n"
        "    'peak_pss_gb': peak / 2**30, 'peak_rss_tree_gb': peak_rss / 2**30,\n"
        "    'stderr_tail': ''.join(tail)[-4000:]}))\n"
    )
    output = subprocess.run([sys.executable, "-c", wrapper, str(sample_seconds), *command], cwd=cwd, env=env,
                            capture_output=True, text=True, check=True)
    return json.loads(output.stdout)
