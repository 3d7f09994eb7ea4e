"""The parameters' types: one pydantic model per section of ``conf/base/parameters_<section>.yml``.
It imports no torch, transformers or optuna (tested), so that checking a configuration and
``bert-mlm params`` are quick.
"""

from bert_mlm.config.base import Section
from bert_mlm.config.corpus import CorpusConfig
from bert_mlm.config.data import DataConfig
from bert_mlm.config.distributed import DistributedConfig
from bert_mlm.config.evaluation import EvaluationConfig, EvaluationParameters
from bert_mlm.config.experiment import SECTIONS, ExperimentConfig, whole_word_requested
from bert_mlm.config.finetune import FinetuneConfig
from bert_mlm.config.masking import MaskingConfig
from bert_mlm.config.model import ModelConfig
from bert_mlm.config.sequences import SequenceConfig
from bert_mlm.config.tokenizer import TokenizerConfig
from bert_mlm.config.tracking import TrackingConfig
from bert_mlm.config.training import TrainingConfig
from bert_mlm.config.tuning import TuningConfig
from bert_mlm.config.variants import VariantOverrides

__all__ = ["SECTIONS", "CorpusConfig", "DataConfig", "DistributedConfig", "EvaluationConfig", "EvaluationParameters",
           "ExperimentConfig", "FinetuneConfig", "MaskingConfig", "ModelConfig", "Section", "SequenceConfig",
           "TokenizerConfig", "TrackingConfig", "TrainingConfig", "TuningConfig", "VariantOverrides",
           "whole_word_requested"]
