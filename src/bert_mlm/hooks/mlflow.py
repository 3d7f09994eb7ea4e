"""MLflow tracking (``BERT_MLM_MLFLOW=1``, through kedro-mlflow; docs/mlflow.md).

MLflow is never imported unless tracking is on: Kedro's command line imports every installed
plugin's commands at start-up, and kedro-mlflow's import MLflow (2.4-2.9 s here, and MLflow's
"Add type hints to the predict method" warning in every run's log). :func:`keep_mlflow_unimported`
puts a stand-in for that one module in its place, which imports the real one when a ``kedro
mlflow ...`` command is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
import time
import types

import click
from kedro.framework.hooks import hook_impl
from kedro.io.core import Version

from bert_mlm.core.train.result import VALID_ACCURACY, VALID_LOSS
from bert_mlm.errors import UserError

MLFLOW_ENV = "BERT_MLM_MLFLOW"


def mlflow_tracking() -> bool:
    """Whether this process tracks to MLflow: ``BERT_MLM_MLFLOW=1`` (read when the settings load)."""
    return os.environ.get(MLFLOW_ENV, "0") == "1"


class _MlflowCommands(click.Group):
    """kedro-mlflow's ``kedro mlflow ...`` commands, imported only when one of them is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return ["mlflow"]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name != "mlflow":
            return None  # `kedro run` asks every group for "run": nothing is imported for it
        return _real(MLFLOW_COMMANDS).commands.get_command(ctx, name)


# kedro-mlflow's two entry points (its command group, its hook) -> what stands for them. Kedro
# unregisters the hook right after loading it (DISABLE_HOOKS_FOR_PLUGINS): any object will do.
MLFLOW_COMMANDS, MLFLOW_HOOK = "kedro_mlflow.framework.cli.cli", "kedro_mlflow.framework.hooks.mlflow_hook"
_STANDING_IN = {MLFLOW_COMMANDS: {"commands": _MlflowCommands("kedro_mlflow")}, MLFLOW_HOOK: {"mlflow_hook": object()}}


def _real(name: str) -> types.ModuleType:
    """The module itself, in place of its stand-in (any use beyond the entry point's)."""
    if getattr(sys.modules.get(name), "__standing_in__", False):
        del sys.modules[name]
    return importlib.import_module(name)


def _stand_in(name: str, attributes: dict) -> types.ModuleType:
    module = types.ModuleType(name, "imported when used; bert_mlm.hooks.mlflow.keep_mlflow_unimported")
    module.__dict__.update(attributes, __standing_in__=True)

    def __getattr__(attribute: str):  # PEP 562: any other use imports the module itself
        if attribute.startswith("__"):  # inspect, pickle and friends probing a module's dunders
            raise AttributeError(attribute)
        return getattr(_real(name), attribute)

    module.__getattr__ = __getattr__
    return module


def keep_mlflow_unimported() -> None:
    """With tracking off, stand-ins take the places of kedro-mlflow's two entry-point modules in
    ``sys.modules`` (a no-op where kedro-mlflow is not installed, or MLflow is imported already)."""
    if "mlflow" in sys.modules or importlib.util.find_spec("kedro_mlflow") is None:
        return
    for name, attributes in _STANDING_IN.items():
        sys.modules.setdefault(name, _stand_in(name, attributes))


# Written by kedro-mlflow's MlflowArtifactDataset (around each dataset's own configuration) when
# tracking is on: the file is logged as an artifact of the run as it is saved.
MLFLOW_ARTIFACTS = ("metrics", "run_report", "mask_rate_comparison_report", "{variant}.metrics")


def mlflow_artifacts(conf_catalog: dict, variants, save_version: str, load_versions: dict) -> dict[str, dict]:
    """``name -> MlflowArtifactDataset arguments`` for :data:`MLFLOW_ARTIFACTS` (a variant's
    pattern for each of ``variants``): the dataset's own configuration, at the run's version (the
    wrapper would give its dataset a version of its own, which the catalog refuses), a variant's
    files under its folder (the variants' files share names)."""
    found = {}
    for pattern in MLFLOW_ARTIFACTS:
        if pattern not in conf_catalog:
            continue
        for variant in variants if "{variant}" in pattern else [""]:
            name = pattern.replace("{variant}", variant)
            dataset = json.loads(json.dumps(conf_catalog[pattern]).replace("{variant}", variant))  # at any depth
            dataset.pop("metadata", None)
            if dataset.pop("versioned", False):
                dataset["version"] = Version(load_versions.get(name), save_version)
            found[name] = {"dataset": dataset, "artifact_path": variant or None,
                           "metadata": conf_catalog[pattern].get("metadata")}
    return found


class MlflowTrackingHook:
    """With MLflow tracking on, kedro-mlflow's own hook opens the run and logs the (redacted)
    parameters, and its ``MlflowArtifactDataset`` logs the report and the metrics file
    (:func:`mlflow_artifacts`, put in the catalog here). This hook logs what kedro-mlflow cannot:

    - the numbers of ``metrics`` and ``training_summary``: its metric datasets take node outputs
      shaped ``{name: {"value", "step"}}``, and these are the project's JSON files;
    - the per-step training curves, with ``log_batch`` (its history dataset logs one value a call).

    Variant outputs (``mask_030.metrics``) keep their prefix. Does nothing without an active run.
    """

    # History column -> MLflow metric: the training curves, and the validation ones on the validated steps only.
    CURVES = {**{name: f"train_{name}" for name in ("loss", "accuracy", "learning_rate", "tokens_per_second")},
              VALID_LOSS: VALID_LOSS, VALID_ACCURACY: VALID_ACCURACY}

    @hook_impl
    def after_catalog_created(self, catalog, conf_catalog: dict, save_version: str, load_versions: dict) -> None:
        if not mlflow_tracking():
            return
        if importlib.util.find_spec("kedro_mlflow") is None:  # asked for, and nothing would be tracked, silently
            raise UserError(f'{MLFLOW_ENV}=1: MLflow tracking needs kedro-mlflow: pip install -e ".[mlflow]" (or '
                            f"unset {MLFLOW_ENV})")
        from kedro_mlflow.io.artifacts import MlflowArtifactDataset

        from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

        for name, arguments in mlflow_artifacts(conf_catalog, VARIANTS, save_version, load_versions or {}).items():
            catalog[name] = MlflowArtifactDataset(**arguments)

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data) -> None:
        prefix, _, name = dataset_name.rpartition(".")
        mlflow = sys.modules.get("mlflow")
        if name not in ("metrics", "training_summary", "training_history") or mlflow is None \
                or mlflow.active_run() is None:
            return
        key = f"{prefix}.{{}}" if prefix else "{}"
        if name in ("metrics", "training_summary"):
            mlflow.log_metrics({key.format(k): float(v) for k, v in data.to_json().items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool)})
        elif len(data):
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            series = [Metric(key.format(curve), float(row[column]), now, int(row["step"]))
                      for row in data.to_dict("records") for column, curve in self.CURVES.items()
                      if column in row and not math.isnan(row[column])]  # NaN: a step not validated
            client = mlflow.MlflowClient()
            for start in range(0, len(series), 1000):  # MLflow's batch limit
                client.log_batch(mlflow.active_run().info.run_id, metrics=series[start : start + 1000])
