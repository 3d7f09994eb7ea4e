"""A tuning worker process for the multi-process tests: `python tuning_worker.py STORAGE N SLEEP [HANG_AT]`.

The objective is a cheap deterministic function of the probability, so the tests exercise the
real Optuna storage, heartbeats and the n_trials bookkeeping, not training.
"""

import sys
import time

from bert_mlm.config import TuningConfig
from bert_mlm.core.study.tuning import run_study

storage, n_trials, sleep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
hang_at = int(sys.argv[4]) if len(sys.argv) > 4 else -1


def run_trial(trial, values, report):
    if trial.number == hang_at:
        # Announce the hang only once the trial's first heartbeat is stored (interval 1 s): a trial
        # killed before any heartbeat has none to go stale, and Optuna never fails it.
        time.sleep(1.5)
        print(f"hanging in trial {trial.number}", flush=True)
        time.sleep(3600)
    time.sleep(sleep)
    report(1, values["probability"])
    return (values["probability"] - 0.3) ** 2


config = TuningConfig(
    n_trials=n_trials, storage=storage, study_name="workers", heartbeat_interval=1, grace_period=3,
    pruner="none", sampler="random",
)
run_study(config, run_trial)
print("done", flush=True)
