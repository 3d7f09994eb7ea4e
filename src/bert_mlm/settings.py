"""Kedro's project settings: the hooks, logging and the configuration loader
(https://docs.kedro.org/en/stable/configure/configuration_basics/#configuration)."""

import multiprocessing
import os
import warnings

from bert_mlm.hooks.mlflow import MlflowTrackingHook, keep_mlflow_unimported, mlflow_tracking
from bert_mlm.hooks.plan import RunPlanHook
from bert_mlm.hooks.plugins import RedactedForPlugins
from bert_mlm.hooks.summary import NodeTimingHook
from bert_mlm.hooks.tensorboard import TensorBoardHook
from bert_mlm.hooks.threads import ThreadsHook
from bert_mlm.hooks.validation import ValidateParametersHook
from bert_mlm.logs import configure_logging

# Kedro's ParallelRunner starts its workers from a fresh fork server, not by forking this process:
# a child forked after torch's OpenMP threads ran (the plan's measured step) hangs in its first
# parallel operation (seen: train_masked_lm asleep in layer_norm until killed).
os.environ.setdefault("KEDRO_MP_CONTEXT", "forkserver")
multiprocessing.set_forkserver_preload(["bert_mlm.forkserver"])  # so that Kedro sets the project up in them

# Plain one-line records in log files, Rich in a terminal (conf/logging.yml, bert_mlm/logs.py).
configure_logging()

# Raised inside Kedro's own config loader on every run; nothing a user of this project can act on.
warnings.filterwarnings("ignore", message=r"register_new_resolver\(\) is deprecated", category=UserWarning)

# Pluggy calls hooks last-registered first: the parameters, the inputs and the run lock are checked,
# then torch's threads are set, then the plan measures a step.
_VALIDATE = ValidateParametersHook()
_THREADS = ThreadsHook(_VALIDATE)
_PLAN = RunPlanHook(_VALIDATE, _THREADS)
HOOKS = (_PLAN, _THREADS, _VALIDATE, NodeTimingHook(_PLAN), MlflowTrackingHook(), TensorBoardHook(),
         RedactedForPlugins())

# MLflow tracking through kedro-mlflow (`pip install -e ".[mlflow]"`) is off by default, also
# when installed: `BERT_MLM_MLFLOW=1 kedro run` turns it on (configuration: conf/base/mlflow.yml).
# Off, nothing imports MLflow: not kedro-mlflow's hook, nor its command-line group.
if not mlflow_tracking():
    DISABLE_HOOKS_FOR_PLUGINS = ("kedro_mlflow", "kedro-mlflow")  # its wheel spells it with "_"
    keep_mlflow_unimported()

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # Environments (smoke, gpu, local) override single keys of a section, e.g. only
    # training.max_steps, instead of replacing the whole section.
    "merge_strategy": {"parameters": "soft", "globals": "soft"},
    # The parameters are the globals too: the catalog reads the corpus settings from
    # parameters_corpus.yml (${globals:corpus.path}), so each corpus key has one home, and
    # `--params corpus.path=...` reaches the catalog (${runtime_params:...}) and the parameters.
    "config_patterns": {"globals": ["parameters*", "parameters*/**", "**/parameters*"]},
}
