"""Nodes of the ``reporting`` pipeline: one HTML report per run."""

from __future__ import annotations

import pandas as pd

from bert_mlm.core.report import run_report


def build_run_report(
    metrics: dict,
    training_history: pd.DataFrame,
    corpus_stats: pd.DataFrame,
    tokenization_stats: pd.DataFrame,
    sequence_stats: pd.DataFrame,
    tuning_trials: pd.DataFrame,
    finetune_runs: pd.DataFrame,
    vocabulary_coverage: dict,
) -> str:
    """Corpus, tokenizer and padding stats (with an inherited vocabulary's coverage), training and
    tuning curves, metrics and fill-mask examples, and the fine-tuning evaluation, on one
    self-contained HTML page."""
    return run_report(metrics, training_history, corpus_stats, tokenization_stats, sequence_stats, tuning_trials,
                      finetune_runs, vocabulary_coverage)
