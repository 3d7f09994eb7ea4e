"""Before any node works: every parameter section validated once, the inputs a run will read
checked, the run lock taken (one run per project), and the run's facts for its record."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from kedro.framework.hooks import hook_impl

from bert_mlm import run_lock
from bert_mlm.config import ExperimentConfig
from bert_mlm.config.finetune import BASELINES
from bert_mlm.core.common.device import resolve_device, resolve_precision
from bert_mlm.core.common.files import remove_dead_temporaries, remove_empty_versions
from bert_mlm.core.data.engine import close_engines
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.finetune.runs import load_labelled
from bert_mlm.core.model.bert import (
    check_starting_tokenizer,
    check_starting_vocabulary,
    check_step_memory_early,
    open_model,
    planned_bert_config,
)
from bert_mlm.core.model.checkpoints import check_checkpoint_dir, checkpoint_bytes
from bert_mlm.core.record.run_record import describe_device, run_facts
from bert_mlm.core.study.record import check_saved_sections
from bert_mlm.core.study.tuning import check_storage
from bert_mlm.core.train.experiment import check_extra_corpus
from bert_mlm.errors import UserError
from bert_mlm.kedro_checks import (
    check_credentials,
    check_inputs_written,
    check_load_versions,
    check_no_globals_file,
    described_run,
)

logger = logging.getLogger(__package__)  # one logger name for the hooks' lines: bert_mlm.hooks


def validate_parameters(parameters: dict) -> ExperimentConfig:
    """The run's typed configuration, checked before any data is read (the values, the starting
    model's files, a step's memory, the checkpoint folder): one ``UserError`` otherwise."""
    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    config = ExperimentConfig.from_parameters(parameters, variants=VARIANTS)
    source_settings(config.corpus.sources)  # a mixture's weights: one line now, not at the training node
    if config.model.init_from:  # a missing or broken checkpoint fails here, before the data stages
        open_model(config.model.init_from, "model.init_from")
        tokenizer = config.tokenizer
        if tokenizer.vocab_path:
            check_starting_vocabulary(config.model.init_from, tokenizer.vocab_path, tokenizer.lowercase,
                                      tokenizer.strip_accents, tokenizer.chinese_chars)
        else:
            check_starting_tokenizer(config.model.init_from, tokenizer.lowercase, tokenizer.strip_accents,
                                     tokenizer.chinese_chars)
    for task in config.finetune.task_configs().values():
        for baseline in set(task.baselines) - set(BASELINES):
            open_model(baseline, "finetune.baseline")
    training, device = config.training, resolve_device(config.training.device)
    planned = planned_bert_config(config.model, config.tokenizer.vocab_size, config.tokenizer.extend_vocabulary)
    # Before the data stages: a step that cannot fit is otherwise killed by the OOM killer, silently.
    # How many sequences a step holds is known once they are counted: core.train.loop checks it exactly.
    if deferred := check_step_memory_early(planned, training.batch_size, config.sequences.max_length, device,
                                           resolve_precision(training.precision, device),
                                           processes=config.distributed.nproc_per_node if device.type == "cpu" else 1):
        logger.warning("%s", deferred)
    if training.checkpoint_dir and (training.checkpoint_every or training.resume):
        check_checkpoint_dir(training.checkpoint_dir, checkpoint_bytes(planned, training.keep_best))
    return config


def check_saved_tuning(config: ExperimentConfig, catalog) -> None:
    """A run that trains without the tuning stage takes the sections that stage saved: refused
    before any work where there are none, or where they disagree with this run's parameters."""
    if not catalog.exists("resolved_masking"):
        raise UserError("resolved_masking: no saved version; the tuning stage saves the masking that training takes "
                        "(the tuning_best_params.json of earlier versions holds the study's record only): add the "
                        "tuning stage to the run (kedro run --pipelines tuning,training,evaluation; with "
                        "tuning.n_trials=0 it passes the configured masking on)")
    saved = {"masking": catalog.load("resolved_masking"), "training": catalog.load("resolved_training")}
    check_saved_sections(catalog.load("tuning_best_params"), saved,
                         {"masking": config.masking, "training": config.training})


class ValidateParametersHook:
    """Validates every section once, then takes the project's run lock (runs in one project would
    load each other's dataset versions) until the run ends.

    Kedro builds the typed sections the nodes declare from ``params:<section>`` when it creates the
    catalog; this hook runs before, on the raw parameters, so that a bad value gets the project's
    one-line message instead of Kedro's, and hands Kedro the built sections (validated once).
    """

    def __init__(self) -> None:
        self.config: ExperimentConfig | None = None

    @hook_impl
    def after_context_created(self, context) -> None:
        from kedro.config import MissingConfigException

        parameters = context.config_loader["parameters"]
        self.config = validate_parameters(parameters)
        context.config_loader["parameters"] = {**parameters, **self.config.parameters()}
        check_no_globals_file(context.config_loader.conf_source, context.env)
        try:  # the credentials Kedro reads for this environment; none without a credentials file
            credentials = dict(context.config_loader["credentials"] or {})
        except (MissingConfigException, KeyError):
            credentials = {}
        check_credentials(context.config_loader["catalog"], credentials, context.env)

    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        from kedro.framework.project import pipelines

        config = self.config or validate_parameters(catalog.load("parameters"))
        check_load_versions(catalog, run_params.get("load_versions"))
        check_inputs_written(pipeline, catalog, pipelines, described_run(run_params))
        tuning, names = config.tuning, {node.name.split(".")[-1] for node in pipeline.nodes}
        if studies := tuning.n_trials > 0 and "tune_mask_probability" in names:
            check_storage(tuning)
        # A bad labelled file fails here, before any training.
        if "finetune_classifier" in names or (studies and tuning.objective == "finetune"):
            for name, task in config.finetune.task_configs().items():
                load_labelled(task, name)
        if "extra_eval_corpus" in pipeline.all_inputs():  # a bad evaluation.corpus_path too
            check_extra_corpus(catalog.load("extra_eval_corpus"))
        nodes = {node.name for node in pipeline.nodes}  # the default chain's, not a variant's namespaced nodes
        if "train_masked_lm" in nodes and "tune_mask_probability" not in nodes:
            check_saved_tuning(config, catalog)
        project = Path(run_params.get("project_path") or Path.cwd())
        run_lock.acquire(project)
        self.started = time.time() - 1  # file times are coarser than the clock on some file systems
        remove_dead_temporaries(project / "data")  # under the lock: no other run of this project writes there

        self.explicit = run_params.get("runtime_params") or {}
        # What no node can know, for the run record (record_run) and the results' model (gather_metrics).
        # Saved into the catalog's memory dataset (assigning would replace it, with Kedro's warning).
        catalog.save("run_facts", run_facts(run_params, config.model_dump(mode="json"), nodes,
                                            describe_device(resolve_device(config.training.device))))

    @hook_impl
    def after_node_run(self, node, outputs: dict) -> None:
        # The study's adopted best replaces masking/training values: say so when the user had set
        # one of them explicitly.
        if node.name == "tune_mask_probability" and getattr(self, "explicit", None):
            for line in outputs["tuning_best_params"].set_aside(self.explicit):
                logger.warning("%s", line)

    @hook_impl
    def after_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        close_engines()
        run_lock.release(run_params.get("project_path") or Path.cwd())

    @hook_impl
    def on_pipeline_error(self, error, run_params: dict, pipeline, catalog) -> None:
        project = Path(run_params.get("project_path") or Path.cwd())
        close_engines()
        if getattr(self, "started", None) is not None:
            remove_empty_versions(project / "data", self.started)
        run_lock.release(project)
