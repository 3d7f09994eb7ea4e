"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

import logging

import pandas as pd

from bert_mlm.core.corpus import RawText, clean_documents
from bert_mlm.core.evaluation import (
    baseline_accuracy,
    evaluate,
    fill_mask_examples,
    most_frequent_token,
    prepare_evaluation_set,
)
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import Collator, SequenceConfig, build_sequences
from bert_mlm.core.tokenizer import encode_documents
from bert_mlm.core.training import TokenIds
from bert_mlm.datasets.pretrained import MaskedLM
from bert_mlm.pipelines.experiment_params import evaluation_protocol

logger = logging.getLogger(__name__)

DEFAULT_SENTENCES = ("The [MASK] of the function is returned.", "This module provides [MASK] for working with files.")


def evaluate_masked_lm(
    trained_model: MaskedLM,
    model_input_sequences: pd.DataFrame,
    token_ids: pd.DataFrame,
    extra_eval_corpus: pd.DataFrame,
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

    test_sequences = list(model_input_sequences.loc[model_input_sequences["split"] == "test", "input_ids"])
    test_set = prepare_evaluation_set(test_sequences, collator, ids.mask, ids.replacement, protocol)
    train_documents = list(token_ids.loc[token_ids["split"] == "train", "input_ids"])
    frequent = most_frequent_token(train_documents, ids.special)

    metrics = dict(evaluate(model, test_set, protocol.batch_size))
    metrics["baseline_accuracy"] = baseline_accuracy(test_set, frequent)
    metrics["baseline_token"] = tokenizer.convert_ids_to_tokens(frequent)
    metrics["accuracy_over_baseline"] = metrics["eval_accuracy"] / max(metrics["baseline_accuracy"], 1e-12)
    metrics["eval_split"] = "test"
    metrics["eval_mask_probability"] = protocol.mask_probability
    metrics["eval_seed"] = protocol.seed
    metrics.update(training_summary)

    if len(extra_eval_corpus):
        items = (RawText(r.source, r.text, int(r.replaced_bytes), bool(r.is_document)) for r in extra_eval_corpus.itertuples(index=False))
        documents, _ = clean_documents(items, min_chars=1, deduplicate=False)
        encoded = encode_documents(tokenizer, documents["text"].tolist())
        sequences = build_sequences(encoded, sequence_config.mode, sequence_config.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        extra_set = prepare_evaluation_set(sequences, collator, ids.mask, ids.replacement, protocol)
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

