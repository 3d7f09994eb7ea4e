"""The project's hooks seen through Kedro's own hook manager: plugins (kedro-mlflow logs every
parameter and tags the run with the run's parameters) see redacted copies, and Kedro and the nodes
get the real values back."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl
from kedro.framework.hooks.manager import _create_hook_manager

from bert_mlm.core.model.masking import MaskingConfig
from bert_mlm.hooks.plugins import RedactedForPlugins
from bert_mlm.logs import RedactedRecords


class Recorder:
    """What a plugin sees (registered after the project's hooks, as Kedro registers plugins)."""

    def __init__(self) -> None:
        self.run_params, self.inputs = None, None

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog):
        self.run_params = {**run_params, "runtime_params": dict(run_params["runtime_params"])}

    @hook_impl
    def before_node_run(self, node, catalog, inputs, is_async, run_id):
        self.inputs = dict(inputs)


def test_plugins_see_redacted_parameters_and_the_run_gets_the_real_ones():
    manager = _create_hook_manager()
    manager.register(RedactedForPlugins())
    recorder = Recorder()
    manager.register(recorder)
    url = "http://reader:Sesame-1@host/corpus.txt"
    run_params = {"project_path": "/p", "runtime_params": {"corpus": {"path": url},
                                                           "tuning": {"storage": "postgresql://u:pw2@h/db"}}}
    manager.hook.before_pipeline_run(run_params=run_params, pipeline=None, catalog=None)
    assert recorder.run_params["runtime_params"] == {"corpus": {"path": "http://reader:***@host/corpus.txt"},
                                                     "tuning": {"storage": "postgresql://u:***@h/db"}}
    assert run_params["runtime_params"]["corpus"]["path"] == url  # Kedro's own copy is the real one

    masking = MaskingConfig(probability=0.2)
    inputs = {"params:corpus": {"path": url, "credentials": {"key": "AKIA", "secret": "Sesame-3"}},
              "params:masking": masking, "token_store": object()}
    manager.hook.before_node_run(node=None, catalog=None, inputs=inputs, is_async=False, run_id="r")
    seen = recorder.inputs
    assert seen["params:corpus"] == {"path": "http://reader:***@host/corpus.txt",
                                     "credentials": {"key": "***", "secret": "***"}}
    assert seen["params:masking"]["probability"] == 0.2  # a typed section as a mapping: flattened by kedro-mlflow
    assert seen["token_store"] is inputs["token_store"]
    assert inputs["params:corpus"]["path"] == url and inputs["params:masking"] is masking  # the node's inputs


def test_log_records_are_redacted_in_every_handler():
    record = logging.LogRecord("fsspec", logging.ERROR, __file__, 1, "cannot open %s", ("https://u:Sesame-4@h/x",),
                               None)
    try:
        raise OSError("401 for url https://u:Sesame-4@h/x?sig=Sesame-5")
    except OSError as error:
        record.exc_info = (type(error), error, error.__traceback__)
    assert RedactedRecords().filter(record)
    assert record.getMessage() == "cannot open https://u:***@h/x"
    assert "Sesame" not in record.exc_text and "https://u:***@h/x?sig=***" in record.exc_text


def test_the_plan_lists_the_stages_a_partial_run_runs_and_no_other():
    """``--pipelines finetune`` runs the fine-tuning and the reporting nodes registered with it: the plan
    lists those two stages, not the tuning and training stages whose registered pipelines share the
    reporting nodes (it once timed ~21 minutes of stages that did not run)."""
    from kedro.pipeline import Pipeline

    from bert_mlm.hooks.plan import planned_stages
    from bert_mlm.pipeline_registry import register_pipelines

    registered = register_pipelines()
    assert planned_stages(registered["finetune"]) == (["finetune", "reporting"], 0)
    assert planned_stages(registered["evaluation"]) == (["evaluation", "reporting"], 0)
    assert planned_stages(registered["__default__"])[0] == [
        "ingestion", "tokenization", "sequences", "tuning", "training", "finetune", "evaluation", "reporting"]
    stages, variants = planned_stages(registered["mask_rate_comparison"])
    assert stages == ["ingestion", "tokenization", "sequences", "reporting", "mask_rate_comparison"] and variants >= 2
    assert planned_stages(Pipeline([])) == ([], 0)


def test_a_budget_beyond_any_plausible_run_is_refused_with_its_estimate(project_copy):
    """training.max_steps=10**21 was accepted: the plan said ~2x10^15 hours and it trained until killed."""
    import re

    from tests.kedro_runs import kedro_cli

    result = kedro_cli(project_copy, "--params", "training.max_steps=1000000000000000000000")
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(r"Error: training: 1,000,000,000,000,000,000,000 steps of .* would take ~[\d,]+ days on this "
                    r"machine \(a training step measured at .* s\): beyond any plausible run", last), last
    assert not (project_copy / "data" / "02_intermediate").exists()  # before the data stages
    from bert_mlm import run_lock

    assert not run_lock.lock_path(project_copy).exists()  # the refused run gave its lock back
