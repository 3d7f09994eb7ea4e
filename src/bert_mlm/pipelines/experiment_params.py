"""Parameter sections -> a validated :class:`~bert_mlm.core.experiment.Experiment` (shared by nodes)."""

from __future__ import annotations

import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.evaluation import EvaluationConfig
from bert_mlm.core.experiment import Experiment, sequences_by_split
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig
from bert_mlm.core.training import TrainingConfig

# Keys of the evaluation section that are not part of the evaluation protocol.
EVALUATION_EXTRAS = ("corpus_path", "text_column", "fill_mask_sentences", "top_k")


def evaluation_protocol(evaluation_params: dict) -> EvaluationConfig:
    protocol = {k: v for k, v in (evaluation_params or {}).items() if k not in EVALUATION_EXTRAS}
    return build_config(EvaluationConfig, protocol, "evaluation")


def build_experiment(
    model_input_sequences: pd.DataFrame,
    tokenizer: PreTrainedTokenizerBase,
    parameters: dict,
) -> Experiment:
    """``parameters`` holds the ``model``, ``training``, ``masking``, ``evaluation`` and
    ``sequences`` sections."""
    return Experiment(
        tokenizer=tokenizer,
        sequences=sequences_by_split(model_input_sequences),
        model_config=build_config(ModelConfig, parameters["model"], "model"),
        training=build_config(TrainingConfig, parameters["training"], "training"),
        masking=build_config(MaskingConfig, parameters["masking"], "masking"),
        evaluation=evaluation_protocol(parameters["evaluation"]),
        sequence_config=build_config(SequenceConfig, parameters["sequences"], "sequences"),
    )
