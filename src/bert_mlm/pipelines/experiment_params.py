"""Parameter sections -> a validated :class:`~bert_mlm.core.experiment.Experiment` (shared by nodes)."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from bert_mlm.core.errors import UserError
from bert_mlm.core.evaluation import EvaluationConfig
from bert_mlm.core.experiment import Experiment, open_sequences
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.training import TrainingConfig

# Keys of the evaluation section that are not part of the evaluation protocol.
EVALUATION_EXTRAS = ("corpus_path", "text_column", "fill_mask_sentences", "fill_mask_count", "top_k")


def evaluation_protocol(evaluation_params: dict) -> EvaluationConfig:
    protocol = {k: v for k, v in (evaluation_params or {}).items() if k not in EVALUATION_EXTRAS}
    return build_config(EvaluationConfig, protocol, "evaluation")


def build_experiment(
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    tokenizer: PreTrainedTokenizerBase,
    parameters: dict,
) -> Experiment:
    """``parameters`` holds the ``model``, ``training``, ``masking``, ``evaluation`` and
    ``sequences`` sections."""
    sequence_config = build_config(SequenceConfig, parameters["sequences"], "sequences")
    if (sequence_index.mode, sequence_index.max_length) != (sequence_config.mode, sequence_config.max_length):
        raise UserError(
            f"sequences: the stored sequence_index is {sequence_index.mode} x {sequence_index.max_length}, "
            f"the parameters ask for {sequence_config.mode} x {sequence_config.max_length}; "
            "run the sequences pipeline with these parameters first"
        )
    masking = build_config(MaskingConfig, parameters["masking"], "masking")
    evaluation = evaluation_protocol(parameters["evaluation"])
    sequence_index.check_words(masking.whole_word, masking.word_segmenter)
    sequence_index.check_words(evaluation.whole_word, masking.word_segmenter, "evaluation.whole_word")
    return Experiment(
        tokenizer=tokenizer,
        sequences=open_sequences(token_store, sequence_index, tokenizer),
        model_config=build_config(ModelConfig, parameters["model"], "model"),
        training=build_config(TrainingConfig, parameters["training"], "training"),
        masking=masking,
        evaluation=evaluation,
        sequence_config=sequence_config,
    )


def whole_word_requested(masking_params: dict, evaluation_params: dict | None, tuning_params: dict | None) -> bool:
    """Whether any part of the run masks whole words: training, the evaluation protocol, or a
    tuning study that searches ``whole_word``."""
    search_space = (tuning_params or {}).get("search_space") or {}
    return bool(
        (masking_params or {}).get("whole_word")
        or (evaluation_params or {}).get("whole_word")
        or (True in (search_space.get("whole_word") or ()) and (tuning_params or {}).get("n_trials", 0))
    )
