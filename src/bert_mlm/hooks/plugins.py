"""Plugins (kedro-mlflow) see the run's parameters redacted; Kedro and the nodes get the real values."""

from __future__ import annotations

from kedro.framework.hooks import hook_impl

from bert_mlm.config import Section
from bert_mlm.core.common.redaction import redact


class RedactedForPlugins:
    """kedro-mlflow logs every node's parameters and the run's (a password in ``corpus.path`` among
    them): these wrappers hand the other implementations of the two hooks redacted copies (typed
    sections as plain mappings) and put the real values back before Kedro uses them."""

    @hook_impl(hookwrapper=True)
    def before_pipeline_run(self, run_params: dict):
        original = dict(run_params)
        run_params.update(redact(original))
        try:
            yield
        finally:
            run_params.clear()
            run_params.update(original)

    @hook_impl(hookwrapper=True)
    def before_node_run(self, inputs: dict):
        original = {name: value for name, value in inputs.items() if name.startswith("params:") or name == "parameters"}
        inputs.update({name: redact(value.model_dump() if isinstance(value, Section) else value)
                       for name, value in original.items()})
        try:
            yield
        finally:
            inputs.update(original)
