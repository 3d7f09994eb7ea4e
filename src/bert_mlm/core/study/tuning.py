"""Optuna study over the masking probability (optionally the 80/10/10 fractions and learning rate);
its trials are :mod:`bert_mlm.core.study.mask_study`'s.

Scale: any Optuna storage works (SQLite file by default, PostgreSQL/MySQL URLs, or
``journal:<path>`` for Optuna's journal file storage). ``n_trials`` is the total number of
finished (complete or pruned) trials in the study, so reruns continue instead of starting over,
and several workers sharing one storage stop together at ``n_trials``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from statistics import fmean

import numpy as np
import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from bert_mlm.config import MaskingConfig, TuningConfig
from bert_mlm.config.tuning import SEARCHABLE
from bert_mlm.core.common.progress import clock
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.common.statistics import combined_interval
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.errors import UserError, causes

logger = logging.getLogger(__name__)

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
# The trials that fill the study's n_trials: finished ones, and those other workers are running.
ACTIVE = (*FINISHED, TrialState.RUNNING)
# Database driver modules SQLAlchemy imports -> the package that provides them (pip's name).
DRIVER_PACKAGES = {
    "psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient", "pymysql": "PyMySQL",
    "asyncpg": "asyncpg", "pg8000": "pg8000", "mysql": "mysql-connector-python", "oracledb": "oracledb",
}


class SurplusTrialError(RuntimeError):
    """Another worker already started the last trial this study needs."""


def make_storage(config: TuningConfig) -> optuna.storages.BaseStorage:
    """An Optuna storage from a URL; SQLite directories are created, heartbeats enabled so a
    killed worker's trial is marked failed instead of staying RUNNING forever."""
    # Heartbeats and QMCSampler are stable in practice but flagged experimental by Optuna.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    url = config.storage
    if url.startswith("journal:"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    sqlite = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None
    return optuna.storages.RDBStorage(url, heartbeat_interval=config.heartbeat_interval,
                                      grace_period=config.grace_period, engine_kwargs=sqlite)


def _password(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).password
    except (ArgumentError, ValueError):
        return None


def check_storage(config: TuningConfig) -> None:
    """Open (or create) the study storage now, so that a malformed URL, a missing database driver
    or an unwritable path stops the run before the data stages, with the parameter named."""
    storage, shown = None, redact(config.storage)
    try:
        storage = make_storage(config)
        storage.get_all_studies()
    except Exception as error:  # SQLAlchemy, drivers and the filesystem raise many types
        # The module a storage URL's database driver needs, when that is why it could not open.
        module = next((cause.name.split(".")[0] for cause in causes(error)
                       if isinstance(cause, ModuleNotFoundError) and cause.name), None)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        # Drivers' messages may repeat the URL or the password.
        reason = reason.replace(config.storage, shown)
        if password := _password(config.storage):
            reason = reason.replace(password, "***")
        reason = redact(reason)
        if module is not None:
            package = DRIVER_PACKAGES.get(module, module)
            reason = f"the database driver {module!r} is not installed (pip install {package!r})"
        raise UserError(f"tuning.storage: {shown!r} cannot be opened: {type(error).__name__}: {reason}") from error
    finally:
        engine = getattr(storage, "engine", None)  # RDB storages hold a connection pool
        if engine is not None:
            engine.dispose()


def make_sampler(config: TuningConfig) -> optuna.samplers.BaseSampler:
    if config.sampler == "qmc":
        # Space-filling (scrambled Sobol): with a handful of trials it covers the range evenly,
        # where TPE would still be in its random start-up phase.
        return optuna.samplers.QMCSampler(seed=config.seed, scramble=True, warn_independent_sampling=False)
    if config.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=max(2, config.n_trials // 3))
    return optuna.samplers.RandomSampler(seed=config.seed)


def make_pruner(config: TuningConfig) -> optuna.pruners.BasePruner:
    if config.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=config.eval_every)
    if config.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=config.eval_every, max_resource=config.trial_steps)
    return optuna.pruners.NopPruner()


def open_study(config: TuningConfig) -> optuna.Study:
    """The study in its storage; two objectives (the domain's and the general text's loss changes)
    for ``tuning.objective: continued``, whose trials are never pruned (Optuna prunes one objective)."""
    two = config.objective == "continued"
    return optuna.create_study(study_name=config.study_name, storage=make_storage(config),
                               directions=["minimize"] * (2 if two else 1), sampler=make_sampler(config),
                               pruner=optuna.pruners.NopPruner() if two else make_pruner(config), load_if_exists=True)


def suggest(trial: optuna.Trial, search_space: dict) -> dict[str, float | bool]:
    values = {}
    for name in sorted(search_space):
        kind = SEARCHABLE[name][1]
        if kind == "choice":
            values[name] = trial.suggest_categorical(name, list(dict.fromkeys(search_space[name])))
        else:
            low, high = map(float, search_space[name])
            values[name] = trial.suggest_float(name, low, high, log=kind == "log")
    return values


def masking_for(values: dict[str, float], base: MaskingConfig) -> MaskingConfig:
    """``base`` with a trial's (or the study's best) masking values in place, validated: a sampled
    combination the rules refuse (fractions that sum above 1) fails its trial."""
    return base.updated({k: v for k, v in values.items() if SEARCHABLE[k][0] == "masking"})


# (trial, suggested values, report(step, eval_loss)) -> final eval loss (two values for objective continued)
TrialRunner = Callable[[optuna.Trial, dict[str, float], Callable[[int, float], None]], float | tuple[float, float]]


def count_trials(study: optuna.Study, states: tuple[TrialState, ...]) -> int:
    return len(study.get_trials(deepcopy=False, states=states))


class _AfterTrial:
    """Optuna's callback after each trial of this worker: one log line with the trials left and an
    ETA (a study of minutes printed nothing between its first and last line); a stop after
    ``n_trials`` failed trials in a row or a surplus trial (refused before it ran: no failure); and
    ``MaxTrialsCallback`` on the shared storage's active trials, once a killed worker's trial has
    been failed (a trial that stopped beating must not count as running)."""

    def __init__(self, n_trials: int) -> None:
        self.n_trials, self.limit, self.failures, self.durations = n_trials, max(n_trials, 1), 0, []
        self.counted = optuna.study.MaxTrialsCallback(n_trials, states=ACTIVE)

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.user_attrs.get("surplus"):
            study.stop()
        else:
            self.failures = self.failures + 1 if trial.state is TrialState.FAIL else 0
            if self.failures >= self.limit:
                study.stop()
            self.durations.append(trial.duration.total_seconds() if trial.duration is not None else 0.0)
            left = max(0, self.n_trials - count_trials(study, ACTIVE))
            value = f" value {', '.join(f'{v:.4f}' for v in trial.values)}" if trial.values else ""
            logger.info("tuning: trial %d %s%s in %s; %d of %d trial(s) left, ETA %s", trial.number,
                        trial.state.name.lower(), value, clock(self.durations[-1]), left, self.n_trials,
                        clock(left * fmean(self.durations)))
        optuna.storages.fail_stale_trials(study)  # a no-op for storages without heartbeats
        self.counted(study, trial)


def run_study(config: TuningConfig, run_trial: TrialRunner) -> optuna.Study:
    """Run trials until the study holds ``config.n_trials`` finished trials. A trial that raises
    is recorded as FAIL and the study goes on, until ``n_trials`` fail in a row (a broken
    configuration, not bad luck); a ``UserError`` stops the study at once and is raised as it is."""
    study = open_study(config)
    user_errors: list[UserError] = []

    def objective(trial: optuna.Trial) -> float:
        # Two workers may both start a trial when one is missing: the later one does not run.
        earlier = [t for t in study.get_trials(deepcopy=False, states=ACTIVE) if t.number < trial.number]
        if len(earlier) >= config.n_trials:
            trial.set_user_attr("surplus", True)
            raise SurplusTrialError(f"trial {trial.number} is beyond tuning.n_trials={config.n_trials}")
        values = suggest(trial, config.search_space)

        def report(step: int, value: float) -> None:
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} with eval loss {value:.4f}")

        try:
            value = run_trial(trial, values, report)
        except UserError as error:
            user_errors.append(error)
            study.stop()
            raise
        if not all(math.isfinite(v) for v in (value if isinstance(value, tuple) else (value,))):
            raise RuntimeError(f"trial {trial.number}: non-finite evaluation loss {value}")
        return value

    optuna.storages.fail_stale_trials(study)
    # The callbacks run after each trial; a rerun of a complete study must not start one.
    if count_trials(study, ACTIVE) < config.n_trials:
        after = _AfterTrial(config.n_trials)
        study.optimize(objective, catch=(Exception,), gc_after_trial=True, callbacks=[after])
        if user_errors:
            raise user_errors[0]
        if after.failures >= after.limit:
            raise RuntimeError(f"tuning: {after.failures} consecutive trials failed; see the log for the first error "
                               "(the study is kept in tuning.storage)")
    # Other workers may still be finishing their trials; this worker's share is done.
    return study


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """Optuna's ``trials_dataframe`` with this project's column names (``attr_*`` for user
    attributes, durations in seconds) and each trial's last reported value and step (what a
    pruned trial is judged by)."""
    frame = study.trials_dataframe(attrs=("number", "state", "value", "duration", "params", "user_attrs"))
    if frame.empty:
        return frame
    frame = frame.rename(columns=lambda c: c.replace("user_attrs_", "attr_", 1) if c.startswith("user_attrs_") else c)
    frame["duration_seconds"] = frame.pop("duration").dt.total_seconds()
    last = {t.number: max(t.intermediate_values.items()) for t in study.get_trials(deepcopy=False)
            if t.intermediate_values}
    frame["last_step"] = frame["number"].map({number: step for number, (step, _) in last.items()})
    frame["last_intermediate_value"] = frame["number"].map({number: value for number, (_, value) in last.items()})
    if len(study.directions) == 2:  # tuning.objective continued: the trials no other trial beats on both objectives
        frame["pareto"] = frame["number"].isin({trial.number for trial in study.best_trials})
    return frame


def history_figure(study: optuna.Study):
    """Optuna's figure of the study: the optimisation history, or the Pareto front of two objectives."""
    if len(study.directions) == 2:
        return optuna.visualization.plot_pareto_front(
            study, target_names=["domain loss change", "general-text loss change (forgetting)"])
    return optuna.visualization.plot_optimization_history(study)


def best_parameters(study: optuna.Study, config: TuningConfig) -> TuningRecord:
    """The study's best complete trial, adopted (before any confirmation)."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise RuntimeError(f"tuning: the study {config.study_name!r} has no complete trial")
    best = min(complete, key=lambda t: t.value)
    overrides = searched_values(best.params)
    return TuningRecord("tuning", overrides["masking"], overrides["training"], study_name=config.study_name,
                        storage=redact(config.storage), objective=config.objective, best_trial=best.number,
                        best_value=best.value, finished_trials=count_trials(study, FINISHED))


def searched_values(params: dict) -> dict[str, dict]:
    """A trial's values by the section they set (``masking``, ``training``, ``corpus``)."""
    sections: dict[str, dict] = {"masking": {}, "training": {}, "corpus": {}}
    for name, value in params.items():
        sections[SEARCHABLE[name][0]][name] = value
    return sections


def paired_interval(differences: list[float]) -> dict:
    """Mean of paired differences, its standard error and its 95 % interval (Student's t:
    :func:`~bert_mlm.core.common.statistics.combined_interval` of one source of error); with fewer
    than two pairs the interval is unbounded."""
    values, pairs = np.asarray(differences, dtype=np.float64), len(differences)
    if pairs < 2:
        return {"mean": float(values.mean()) if pairs else math.nan, "low": -math.inf, "high": math.inf, "pairs": pairs}
    variance = [(float(values.var(ddof=1)) / pairs, pairs - 1)]
    found = combined_interval(float(values.mean()), variance)
    return {"mean": found.mean, "se": found.se, "low": found.low, "high": found.high, "pairs": pairs}


def adoption(interval: dict, adopt: str, measure: str = "eval loss") -> tuple[bool, str]:
    """Whether to train at the tuned setting, and why. ``interval`` is over (configured - tuned)
    objective (eval loss, or fine-tuning error): positive means the tuned setting is better."""
    if adopt == "always":
        return True, "tuning.adopt is always"
    if interval["low"] > 0:
        return True, (
            f"the tuned setting lowers the {measure} by {interval['mean']:.4f} "
            f"(95 % interval {interval['low']:.4f} to {interval['high']:.4f}, {interval['pairs']} paired seeds)"
        )
    if interval["pairs"] < 2:
        return False, "one confirmation seed gives no interval (set tuning.seeds >= 2): kept the configured masking"
    return False, (
        f"the {measure} difference {interval['mean']:.4f} is within seed noise (95 % interval {interval['low']:.4f} "
        f"to {interval['high']:.4f}, {interval['pairs']} paired seeds): kept the configured masking"
    )
