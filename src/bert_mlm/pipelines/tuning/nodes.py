"""Nodes of the ``tuning`` pipeline: an Optuna study over the masking probability."""

from __future__ import annotations

import matplotlib.pyplot as plt
import optuna
import pandas as pd
import plotly.graph_objects as go
from transformers import PreTrainedTokenizerBase

from bert_mlm.config import (
    CorpusConfig,
    EvaluationParameters,
    FinetuneConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TrainingConfig,
    TuningConfig,
)
from bert_mlm.core.record.figures import tuning_curve
from bert_mlm.core.study.mask_study import tune_masking
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.study.tuning import trials_table
from bert_mlm.core.tokens.sequences import SequenceIndex
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.experiment import Experiment


def tune_mask_probability(
    token_store: TokenStore, sequence_index: SequenceIndex, tokenizer: PreTrainedTokenizerBase, config: TuningConfig,
    model: ModelConfig, training: TrainingConfig, masking: MaskingConfig, evaluation: EvaluationParameters,
    sequences: SequenceConfig, finetune: FinetuneConfig, corpus: CorpusConfig,
) -> tuple[MaskingConfig, TrainingConfig | dict, TuningRecord, pd.DataFrame, plt.Figure, go.Figure]:
    """Run (or continue) the study; return the masking to train with (the configured one, or the
    study's best when it was adopted), the training section when the study chose training values
    (else ``{}``: training takes ``params:training``), the study's record, the trials, the trials'
    eval loss against the searched value, and Optuna's optimisation history.

    With ``tuning.n_trials: 0`` the study is skipped and the configured masking is passed on.
    """
    experiment = Experiment.from_store(token_store, sequence_index, tokenizer, model=model, training=training,
                                       masking=masking, evaluation=evaluation.protocol, sequences=sequences,
                                       mixture=corpus.sources)
    if True in (config.search_space.get("whole_word") or ()):
        sequence_index.check_words(True, masking.word_segmenter, "tuning.search_space.whole_word")
    if any(span != "none" for span in config.search_space.get("span") or ()):
        sequence_index.check_words(True, masking.word_segmenter, "tuning.search_space.span")
    if config.n_trials == 0:
        no_trials = pd.DataFrame(columns=["number", "state", "value"])
        return masking, {}, TuningRecord.of_parameters(masking), no_trials, plt.figure(), go.Figure()

    resolved_masking, resolved_training, record, study = tune_masking(experiment, config, finetune)
    trials = trials_table(study)
    return (resolved_masking, resolved_training or {}, record, trials, tuning_curve(trials, config.objective)
            or plt.figure(), optuna.visualization.plot_optimization_history(study))
