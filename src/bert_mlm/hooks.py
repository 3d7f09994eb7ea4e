"""Project hooks: validate every parameter section before any node does expensive work."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl

from bert_mlm.core.corpus import CorpusConfig
from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig
from bert_mlm.core.tokenizer import TokenizerConfig
from bert_mlm.core.training import TrainingConfig, resolve_device, resolve_precision
from bert_mlm.core.tuning import TuningConfig
from bert_mlm.pipelines.experiment_params import evaluation_protocol

logger = logging.getLogger(__name__)

SECTIONS = {
    "corpus": CorpusConfig,
    "tokenizer": TokenizerConfig,
    "sequences": SequenceConfig,
    "model": ModelConfig,
    "masking": MaskingConfig,
    "training": TrainingConfig,
    "tuning": TuningConfig,
    "distributed": DistributedConfig,
}


def validate_parameters(parameters: dict) -> None:
    """Raise one clear ``ValueError`` naming the first bad parameter, its value and what is allowed."""
    built = {name: build_config(cls, parameters.get(name), name) for name, cls in SECTIONS.items()}
    evaluation_protocol(parameters.get("evaluation"))
    built["sequences"].check_fits(built["model"].max_position_embeddings)
    training = built["training"]
    resolve_precision(training.precision, resolve_device(training.device))


class ValidateParametersHook:
    @hook_impl
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:
        validate_parameters(catalog.load("parameters"))
