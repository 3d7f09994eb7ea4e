"""CPU threads: training steps/s of the default model (2 x 128, vocab 8192, batch 32 x 128, fp32),
one process alone and two processes side by side on the same CPUs, with torch's default
intra-op pool against a capped one (``training.threads``). Each process trains its own model on
random tokens (the step the default `kedro run` takes, masking on the host included), for
``--seconds`` after a warm-up; the table reports each process's median steps/s over the repeats.

    python bench/threads.py                      # alone and in pairs, default vs capped
    python bench/threads.py --seconds 20 --repeats 5

Scenarios alternate within each repeat (the machine's other load moves between repeats, not
between the systems compared), and `/proc/loadavg` is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _timing import Table, median

HERE = Path(__file__).resolve().parent


def worker(threads: int, seconds: float) -> dict:
    """One process: ``threads`` intra-op threads (0: torch's default), steps/s over ``seconds``."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from bert_mlm.config import ExperimentConfig
    from bert_mlm.core.train.plan import measure_step

    config = ExperimentConfig.from_parameters({"tokenizer": {"vocab_size": 8192}, "training": {"precision": "fp32"}})
    timing = measure_step(config, torch.device("cpu"), budget_seconds=seconds, max_steps=10_000)
    return {"threads": torch.get_num_threads(), "steps_per_second": 1 / timing.step_seconds}


def weights_after_steps(threads: int, path: str, steps: int = 3) -> None:
    """The default model after ``steps`` AdamW steps on fixed random batches, with ``threads``
    threads, saved to ``path``: the same seed and data, only the thread count differs."""
    import torch

    torch.set_num_threads(threads)
    from transformers import BertForMaskedLM

    from bert_mlm.config import ModelConfig
    from bert_mlm.core.model.bert import planned_bert_config

    torch.manual_seed(0)
    model = BertForMaskedLM(planned_bert_config(ModelConfig(), vocab_size=8192))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = torch.randint(5, 8192, (32, 128), generator=generator)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.save(model.state_dict(), path)


def thread_count_difference(threads: int) -> float:
    """The largest weight difference between the same 3 steps trained with 1 thread and with ``threads``."""
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as scratch:
        paths = [f"{scratch}/{n}.pt" for n in (1, threads)]
        for n, path in zip((1, threads), paths, strict=True):
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--weights", path, "--threads", str(n)],
                           check=True, cwd=HERE)
        one, many = (torch.load(path) for path in paths)
    return max(float((one[key] - many[key]).abs().max()) for key in one)


def run_processes(threads: list[int], seconds: float, env: dict | None = None) -> list[dict]:
    """Processes started together, one per entry of ``threads``; their results. ``env``: variables
    for the processes (OpenMP reads OMP_WAIT_POLICY when torch loads)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seconds", str(seconds)]
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    environment.update(env or {})
    processes = [subprocess.Popen([*command, "--threads", str(n)], stdout=subprocess.PIPE, text=True, cwd=HERE,
                                  env=environment) for n in threads]
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"worker failed with status {process.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def run(seconds: float, repeats: int, capped: int, openmp: tuple[str, ...] = ()) -> Table:
    import torch

    default = torch.get_num_threads()
    plural = "s" if capped > 1 else ""
    scenarios = {
        f"alone, torch default ({default} threads)": ([0], None),
        f"alone, capped ({capped} thread{plural})": ([capped], None),
        f"two side by side, torch default ({default} threads each)": ([0, 0], None),
        f"two side by side, capped ({capped} thread{plural} each)": ([capped, capped], None),
    }
    for setting in openmp:  # how OpenMP's threads wait (read when torch loads): same threads, same results
        name, _, value = setting.partition("=")
        scenarios[f"alone, {default} threads, {setting}"] = ([0], {name: value})
        scenarios[f"two side by side, {default} threads each, {setting}"] = ([0, 0], {name: value})
    rates: dict[str, list[float]] = {name: [] for name in scenarios}
    before = loadavg()
    for _ in range(repeats):
        for name, (threads, env) in scenarios.items():
            results = run_processes(threads, seconds, env)
            rates[name].append(median([r["steps_per_second"] for r in results]))
            print(name, [round(r["steps_per_second"], 2) for r in results], flush=True)
    after = loadavg()
    alone = median(rates[f"alone, torch default ({default} threads)"])
    table = Table(
        f"Threads: steps/s per process, default model (2 x 128, batch 32 x 128), {os.cpu_count()} cores",
        ["scenario", "median steps/s per process", "range", "vs alone with the default", "machine's steps/s"],
    )
    for name, values in rates.items():
        rate = median(values)
        table.rows.append([name, f"{rate:.2f}", f"{min(values):.2f}–{max(values):.2f}", f"{rate / alone:.2f}x",
                           f"{rate * len(scenarios[name][0]):.2f}"])
    flag = "".join(f" --openmp {setting}" for setting in openmp)
    table.notes = [f"`python bench/threads.py --seconds {seconds:g} --repeats {repeats}{flag}`: {seconds:g} s of "
                   f"steps per process after a warm-up, {repeats} alternating repeats. /proc/loadavg before: "
                   f"{before}; after: {after}."]
    table.data = {"rates": rates, "loadavg": [before, after]}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed steps per process")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--capped", type=int, default=1, help="threads per process in the capped scenarios")
    parser.add_argument("--openmp", action="append", default=[], metavar="NAME=VALUE",
                        help="also torch's default threads with this OpenMP setting, e.g. OMP_WAIT_POLICY=PASSIVE")
    parser.add_argument("--difference", action="store_true",
                        help="also: how far 3 training steps with 1 thread and with torch's default drift apart")
    parser.add_argument("--weights", default="", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.threads, args.seconds)))
        return
    if args.weights:
        weights_after_steps(args.threads, args.weights)
        return
    if args.difference:
        import torch

        threads = torch.get_num_threads()
        print(f"3 steps with 1 thread vs {threads}: weights differ by up to {thread_count_difference(threads):.2e}")
    started = time.perf_counter()
    print(run(args.seconds, args.repeats, args.capped, tuple(args.openmp)).markdown())
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
