"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

from bert_mlm.config import EvaluationParameters, SequenceConfig
from bert_mlm.core.device import resolve_device
from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.evaluation import fill_mask_report
from bert_mlm.core.experiment import held_out_metrics
from bert_mlm.core.finetune import for_metrics_json
from bert_mlm.core.redaction import redact
from bert_mlm.core.sequences import SequenceIndex
from bert_mlm.core.sources import CorpusSource
from bert_mlm.core.token_store import TokenStore
from bert_mlm.datasets.pretrained import MaskedLM


def evaluate_masked_lm(
    trained_model: MaskedLM,
    corpus_documents: DocumentShards,
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    extra_eval_corpus: CorpusSource,
    training_summary: dict,
    finetune_metrics: dict,
    evaluation: EvaluationParameters,
    sequences: SequenceConfig,
) -> dict:
    """Metrics on the test split (and on ``evaluation.corpus_path`` when given) under the fixed
    protocol, the most-frequent-token reference, the fine-tuning results, and fill-mask examples: the configured
    sentences, else test-split sentences with one word masked and the true word beside the fills."""
    model, tokenizer = trained_model.model, trained_model.tokenizer
    extra = None if extra_eval_corpus.is_empty else (item for batch in extra_eval_corpus.batches() for item in batch)
    metrics = held_out_metrics(model, tokenizer, token_store, sequence_index, evaluation.protocol, sequences, extra,
                               device=resolve_device("auto"))
    metrics.update(
        training_summary,
        **for_metrics_json(finetune_metrics),
        **({} if extra is None else {"extra_corpus_path": redact(evaluation.corpus_path)}),
    )
    held_out_texts = (text for batch in corpus_documents.iter_texts("test") for text in batch)
    metrics["fill_mask_examples"] = fill_mask_report(model, tokenizer, evaluation.fill_mask_sentences, held_out_texts,
                                                     evaluation.fill_mask_count, evaluation.seed, evaluation.top_k)
    return metrics  # the run summary logs the headline (bert_mlm.hooks.NodeTimingHook), once
