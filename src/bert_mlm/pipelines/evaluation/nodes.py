"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

import logging

from bert_mlm.core.corpus import CorpusSource, clean_documents
from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.evaluation import (
    baseline_accuracy,
    evaluate,
    fill_mask_examples,
    fill_mask_sentences_from,
    most_frequent_token,
    prepare_evaluation_set,
)
from bert_mlm.core.experiment import open_sequences
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex, build_sequences
from bert_mlm.core.token_store import TokenStore
from bert_mlm.core.tokenizer import encode_documents
from bert_mlm.core.training import TokenIds
from bert_mlm.datasets.pretrained import MaskedLM
from bert_mlm.pipelines.experiment_params import evaluation_protocol

logger = logging.getLogger(__name__)

def evaluate_masked_lm(
    trained_model: MaskedLM,
    corpus_documents: DocumentShards,
    token_store: TokenStore,
    sequence_index: SequenceIndex,
    extra_eval_corpus: CorpusSource,
    training_summary: dict,
    probe_metrics: dict,
    evaluation_params: dict,
    sequence_params: dict,
) -> dict:
    """Metrics on the test split (and on ``evaluation.corpus_path`` when given) under the fixed
    protocol, the most-frequent-token reference, and fill-mask examples: the configured
    sentences, else test-split sentences with one word masked and the true word beside the fills."""
    protocol = evaluation_protocol(evaluation_params)
    sequence_config = build_config(SequenceConfig, sequence_params, "sequences")
    model, tokenizer = trained_model.model, trained_model.tokenizer
    ids = TokenIds.from_tokenizer(tokenizer)
    collator = ids.collator(sequence_config.max_length, sequence_config.padding)
    sequence_index.check_words(protocol.whole_word, "auto", "evaluation.whole_word")

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
    metrics["eval_whole_word"] = protocol.whole_word
    metrics.update(training_summary)
    metrics.update(probe_metrics)

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

    top_k = int(evaluation_params.get("top_k", 5))
    sentences = evaluation_params.get("fill_mask_sentences")
    if sentences:  # the user's own sentences take precedence
        examples = fill_mask_examples(model, tokenizer, sentences, top_k)
    else:
        sentences, answers = fill_mask_sentences_from(
            (text for batch in corpus_documents.iter_texts("test") for text in batch), tokenizer,
            count=int(evaluation_params.get("fill_mask_count", 3)), seed=protocol.seed,
        )
        examples = fill_mask_examples(model, tokenizer, sentences, top_k, answers)
    metrics["fill_mask_examples"] = examples
    logger.info(
        "Eval loss %.4f, accuracy %.4f (%.2fx the most-frequent-token reference %.4f), top-5 %.4f",
        metrics["eval_loss"], metrics["eval_accuracy"], metrics["accuracy_over_baseline"],
        metrics["baseline_accuracy"], metrics["eval_top5_accuracy"],
    )
    return metrics

