"""Nodes of the ``tuning`` pipeline: an Optuna study over the masking probability."""

from __future__ import annotations

import matplotlib.pyplot as plt
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
from bert_mlm.core.data.sources import CorpusSource
from bert_mlm.core.record.figures import tuning_curve
from bert_mlm.core.study.continued import tune_continued
from bert_mlm.core.study.mask_study import tune_masking
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.study.tuning import history_figure, trials_table
from bert_mlm.core.tokens.sequences import SequenceIndex
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.experiment import Experiment


def tune_mask_probability(
    token_store: TokenStore, sequence_index: SequenceIndex, tokenizer: PreTrainedTokenizerBase, config: TuningConfig,
    model: ModelConfig, training: TrainingConfig, masking: MaskingConfig, evaluation: EvaluationParameters,
    sequences: SequenceConfig, finetune: FinetuneConfig, corpus: CorpusConfig, extra_eval_corpus: CorpusSource,
) -> tuple[MaskingConfig, TrainingConfig | dict, TuningRecord, pd.DataFrame, plt.Figure, go.Figure]:
    """Run (or continue) the study; return the masking to train with (the configured one, or the
    study's best when it was adopted), the training section when the study chose training values
    (else ``{}``), the study's record, the trials, their plot (or the Pareto front of ``objective:
    continued``, scored on ``extra_eval_corpus``) and Optuna's figure. ``n_trials: 0`` skips the study.
    """
    experiment = Experiment.from_store(token_store, sequence_index, tokenizer, model=model, training=training,
                                       masking=masking, evaluation=evaluation.protocol, sequences=sequences,
                                       mixture=corpus.sources)
    for searched in ("whole_word", "span"):  # word-level masking needs the stored word boundaries
        if any(value not in (False, "none") for value in config.search_space.get(searched) or ()):
            sequence_index.check_words(True, masking.word_segmenter, f"tuning.search_space.{searched}")
    if config.n_trials == 0:
        no_trials = pd.DataFrame(columns=["number", "state", "value"])
        return masking, {}, TuningRecord.of_parameters(masking), no_trials, plt.figure(), go.Figure()

    if config.objective == "continued":  # the domain's gain against forgetting on the general text
        general = (text for batch in extra_eval_corpus.batches() for text in batch)
        tuned = tune_continued(experiment, config, general, corpus.held_out_of_replay(evaluation.corpus_path),
                               corpus.sources)
    else:
        tuned = tune_masking(experiment, config, finetune)
    resolved_masking, resolved_training, record, study = tuned
    trials = trials_table(study)
    return (resolved_masking, resolved_training or {}, record, trials,
            tuning_curve(trials, config.objective, config.forgetting_budget) or plt.figure(), history_figure(study))
