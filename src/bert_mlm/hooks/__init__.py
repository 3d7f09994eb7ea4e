"""Project hooks, one a module: validation (parameters, inputs, the run lock), threads, the plan,
redaction for plugins, the end-of-run summary, TensorBoard and MLflow tracking. ``settings.HOOKS``
registers them in the order pluggy calls them (last registered, first called)."""

from bert_mlm.hooks.mlflow import MlflowTrackingHook, keep_mlflow_unimported, mlflow_tracking
from bert_mlm.hooks.plan import RunPlanHook, planned_stages
from bert_mlm.hooks.plugins import RedactedForPlugins
from bert_mlm.hooks.summary import NodeTimingHook, summary_lines
from bert_mlm.hooks.tensorboard import TensorBoardHook
from bert_mlm.hooks.threads import ThreadsHook
from bert_mlm.hooks.validation import ValidateParametersHook, validate_parameters

__all__ = [
    "MlflowTrackingHook", "NodeTimingHook", "RedactedForPlugins", "RunPlanHook", "TensorBoardHook", "ThreadsHook",
    "ValidateParametersHook", "keep_mlflow_unimported", "mlflow_tracking", "planned_stages", "summary_lines",
    "validate_parameters",
]
