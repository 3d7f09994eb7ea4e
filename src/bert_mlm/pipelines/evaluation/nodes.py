"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

import logging

from bert_mlm.core.corpus import CorpusSource, clean_documents
from bert_mlm.core.evaluation import (
    baseline_accuracy,
    evaluate,
    fill_mask_examples,
    most_frequent_token,
    prepare_evaluation_set,
)
from bert_mlm.core.experiment import open_sequences
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import Collator, SequenceConfig, SequenceIndex, build_sequences
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.tokenizer import encode_documents
from bert_mlm.core.training import TokenIds
from bert_mlm.datasets.pretrained import MaskedLM
from bert_mlm.pipelines.experiment_params import evaluation_protocol

logger = logging.getLogger(__name__)

DEFAULT_SENTENCES = ("The [MASK] of the function is returned.", "This module provides [MASK] for working with files.")


def evaluate_masked_lm(
    trained_model: MaskedLM,
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    extra_eval_corpus: CorpusSource,
    training_summary: dict,
    evaluation_params: dict,
    sequence_params: dict,
) -> dict:
    """Metrics on the test split (and on ``evaluation.corpus_path`` when given) under the fixed
    protocol, the most-frequent-token reference, and fill-mask examples."""
    protocol = evaluation_protocol(evaluation_params)
    sequence_config = build_config(SequenceConfig, sequence_params, "sequences")
    model, tokenizer = trained_model.model, trained_model.tokenizer
    ids = TokenIds.from_tokenizer(tokenizer)
    collator = Collator(ids.pad, ids.special, sequence_config.max_length, sequence_config.padding)

    sequences = open_sequences(token_store, sequence_index, tokenizer)
    test_set = prepare_evaluation_set(sequences["test"], collator, ids.mask, ids.replacement, protocol)
    frequent = most_frequent_token(token_store.split("train").counts, ids.special)

    metrics = dict(evaluate(model, test_set, protocol.batch_size))
    metrics["baseline_accuracy"] = baseline_accuracy(test_set, frequent)
    metrics["baseline_token"] = tokenizer.convert_ids_to_tokens(frequent)
    metrics["accuracy_over_baseline"] = metrics["eval_accuracy"] / max(metrics["baseline_accuracy"], 1e-12)
    metrics["eval_split"] = "test"
    metrics["eval_mask_probability"] = protocol.mask_probability
    metrics["eval_seed"] = protocol.seed
    metrics.update(training_summary)

    if not extra_eval_corpus.is_empty:
        items = (item for batch in extra_eval_corpus.batches() for item in batch)
        documents, _ = clean_documents(items, min_words=1, deduplicate=False)
        encoded = encode_documents(tokenizer, documents["text"].tolist())
        extra_sequences = build_sequences(encoded, sequence_config.mode, sequence_config.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        extra_set = prepare_evaluation_set(extra_sequences, collator, ids.mask, ids.replacement, protocol)
        extra = evaluate(model, extra_set, protocol.batch_size)
        metrics.update({f"extra_{k}": v for k, v in extra.items()})
        metrics["extra_baseline_accuracy"] = baseline_accuracy(extra_set, frequent)
        metrics["extra_corpus_path"] = evaluation_params.get("corpus_path")

    sentences = evaluation_params.get("fill_mask_sentences") or list(DEFAULT_SENTENCES)
    examples = fill_mask_examples(model, tokenizer, sentences, int(evaluation_params.get("top_k", 5)))
    metrics["fill_mask_examples"] = examples
    logger.info(
        "Eval loss %.4f, accuracy %.4f (%.2fx the most-frequent-token reference %.4f), top-5 %.4f",
        metrics["eval_loss"], metrics["eval_accuracy"], metrics["accuracy_over_baseline"],
        metrics["baseline_accuracy"], metrics["eval_top5_accuracy"],
    )
    return metrics

