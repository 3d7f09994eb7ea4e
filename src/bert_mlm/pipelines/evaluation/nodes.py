"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

import logging

from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.evaluation import fill_mask_report, most_frequent_token, prepare_evaluation_set, protocol_metrics
from bert_mlm.core.experiment import corpus_sequences, open_sequences
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig, SequenceIndex
from bert_mlm.core.sources import CorpusSource
from bert_mlm.core.token_store import TokenStore
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
    frequent = most_frequent_token(token_store.split("train").counts, ids.special)

    def scored(sequences) -> dict:
        held_out = prepare_evaluation_set(sequences, collator, ids.mask, ids.replacement, protocol)
        return protocol_metrics(model, held_out, frequent, protocol.batch_size)

    metrics = scored(open_sequences(token_store, sequence_index, tokenizer)["test"])
    metrics.update(
        baseline_token=tokenizer.convert_ids_to_tokens(frequent),
        accuracy_over_baseline=metrics["eval_accuracy"] / max(metrics["baseline_accuracy"], 1e-12),
        eval_split="test", eval_mask_probability=protocol.mask_probability, eval_seed=protocol.seed,
        eval_whole_word=protocol.whole_word, **training_summary, **probe_metrics,
    )
    if not extra_eval_corpus.is_empty:
        extra = scored(corpus_sequences((i for batch in extra_eval_corpus.batches() for i in batch), tokenizer, sequence_config))
        metrics.update({f"extra_{k}": v for k, v in extra.items()}, extra_corpus_path=evaluation_params.get("corpus_path"))
    metrics["fill_mask_examples"] = fill_mask_report(
        model, tokenizer, evaluation_params.get("fill_mask_sentences"),
        (text for batch in corpus_documents.iter_texts("test") for text in batch),
        count=int(evaluation_params.get("fill_mask_count", 3)), seed=protocol.seed, top_k=int(evaluation_params.get("top_k", 5)),
    )
    logger.info("Eval loss %.4f, accuracy %.4f (%.2fx the most-frequent-token reference %.4f), top-5 %.4f",
                metrics["eval_loss"], metrics["eval_accuracy"], metrics["accuracy_over_baseline"],
                metrics["baseline_accuracy"], metrics["eval_top5_accuracy"])
    return metrics
