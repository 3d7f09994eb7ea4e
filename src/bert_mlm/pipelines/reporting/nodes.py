"""Nodes of the ``reporting`` pipeline: the run's record, one model's results gathered into
``metrics.json``, the HTML report, and the model card in the model's folder."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import MaskingConfig, TrainingConfig
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.record.model_card import ModelCard, model_card
from bert_mlm.core.record.provenance import provenance
from bert_mlm.core.record.report import run_report
from bert_mlm.core.record.results import ModelResults, collect, saved_in
from bert_mlm.core.record.run_record import LANGUAGE_SAMPLE_CHARS, DataRecord, RunRecord, corpus_language, run_record
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.result import TrainingSummary
from bert_mlm.datasets.run_record import RunRecords


def record_run(run_facts: RunRecord, resolved_masking: MaskingConfig | dict, resolved_training: TrainingConfig | dict,
               tuning_record: TuningRecord | None, corpus_documents: DocumentShards,
               token_store: TokenStore) -> RunRecord:
    """The run's record (``run_config``): the hook's facts, the sections the training took from the
    tuning stage (the corpus too, when a study chose the replay share), and the corpus and token
    store the run read."""
    resolved = {name: section.model_dump(mode="json") if hasattr(section, "model_dump") else dict(section)
                for name, section in (("masking", resolved_masking), ("training", resolved_training))}
    corpus = run_facts.section("corpus")
    share = tuning_record.replay_share if tuning_record is not None and run_facts.trains else None
    if share is not None:  # the share training drew, not the configured one
        corpus = {**corpus, "sources": tuning_record.sources(corpus["sources"]),
                  "replay": {**corpus["replay"], "share": share}}
        resolved["corpus"] = corpus
    splits = corpus_documents.manifest["splits"]
    # A mixture: each source's share of the store, and its weight or repeat (corpus.sources, a mapping or a list).
    settings = source_settings(corpus.get("sources")) or {}
    data = DataRecord(
        source=(corpus_documents.manifest.get("settings") or {}).get("source"),
        language=corpus_language(corpus_documents.sample_texts("train", LANGUAGE_SAMPLE_CHARS)),
        documents={split: info["documents"] for split, info in splits.items()},
        documents_version=corpus_documents.directory.parent.name,
        token_store={"version": token_store.directory.parent.name,
                     "digests": {**{split: token_store.digest(split) for split in splits},
                                 "vocabulary": token_store.vocabulary_digest}},
        sources=[{**source, **dict([settings[source["name"]]] if source["name"] in settings else [])}
                 for source in token_store.sources or ()] or None,
    )
    return run_record(run_facts, resolved, data)


def gather_metrics(run_facts: RunRecord, evaluation_metrics: Evaluation | None,
                   training_summary: TrainingSummary | None, finetune_metrics: FinetuneResults) -> ModelResults:
    """``metrics.json``: the evaluation, training summary and fine-tuning results of one model (the
    one this run used, else the newest), each only where it was made for that model."""
    return collect(run_facts.run_id, evaluation_metrics, training_summary, finetune_metrics)


def build_run_report(
    metrics: ModelResults, training_history: pd.DataFrame, corpus_stats: pd.DataFrame,
    tokenization_stats: pd.DataFrame, sequence_stats: pd.DataFrame, tuning_trials: pd.DataFrame,
    tuning_best_params: TuningRecord | None, evaluation_metrics: Evaluation | None, finetune_metrics: FinetuneResults,
    finetune_runs: pd.DataFrame, vocabulary_coverage: dict, run_config: RunRecords, run_facts: RunRecord,
) -> str:
    """Every stage's results on one self-contained HTML page that opens with how the model's run
    was made and says which model and run each section belongs to."""
    data_runs = {"corpus": saved_in(corpus_stats), "tokenization": saved_in(tokenization_stats),
                 "sequences": saved_in(sequence_stats)}
    origin = provenance(metrics, run_config.of(run_facts.run_id) or run_config.latest,
                        run_config.of(metrics.model_version), study=tuning_best_params, finetune=finetune_metrics,
                        evaluation=evaluation_metrics, data_runs=data_runs,
                        history_run=saved_in(training_history) if len(training_history) else None)
    shown_runs = finetune_runs if metrics.finetune and metrics.finetune.version == saved_in(finetune_runs) else None
    return run_report(metrics, training_history, corpus_stats, tokenization_stats, sequence_stats, tuning_trials,
                      shown_runs, vocabulary_coverage, provenance=origin)


def write_model_card(metrics: ModelResults, run_config: RunRecords) -> ModelCard:
    """The card (``README.md``) of ``metrics``' model, for its folder; a card of no model (which is
    not written) where no run has saved a model yet."""
    return model_card(metrics, run_config.of(metrics.model_version)) if metrics.model_version else ModelCard(None, "")
