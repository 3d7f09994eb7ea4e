"""Nodes of the ``evaluation`` pipeline: fixed-protocol metrics and fill-mask examples."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import PurePosixPath

from bert_mlm.config import CorpusConfig, EvaluationParameters, ModelConfig, SequenceConfig
from bert_mlm.core.common.device import resolve_device
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.sources import CorpusSource
from bert_mlm.core.evaluate.fill_mask import fill_mask_report
from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.tokens.sequences import SequenceIndex
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.experiment import held_out_metrics, starting_weights
from bert_mlm.datasets.pretrained import MaskedLM

logger = logging.getLogger(__name__)


def evaluate_masked_lm(trained_model: MaskedLM, corpus_documents: DocumentShards, token_store: TokenStore,
                       sequence_index: SequenceIndex, extra_eval_corpus: CorpusSource, evaluation: EvaluationParameters,
                       sequences: SequenceConfig, model: ModelConfig, corpus: CorpusConfig) -> Evaluation:
    """Metrics on the test split (and on ``evaluation.corpus_path`` when given) under the fixed
    protocol, the most-frequent-token reference, and fill-mask examples (the configured sentences,
    else test-split sentences with one word masked); with ``model.init_from``, the starting model
    scored on the same masked tokens too."""
    trained, tokenizer = trained_model.model, trained_model.tokenizer
    extra = None if extra_eval_corpus.is_empty else (item for batch in extra_eval_corpus.batches() for item in batch)
    names = (f"the test split of {source_name(corpus.path)}" if corpus.path else "the test split",
             source_name(evaluation.corpus_path or ""))
    scored = held_out_metrics(trained, tokenizer, token_store, sequence_index, evaluation.protocol, sequences, extra,
                              device=resolve_device("auto"), starting_model=starting_weights(model, tokenizer),
                              corpus_names=names, extra_held_out_of=replay_held_out(corpus, evaluation.corpus_path))
    held_out_texts = (text for batch in corpus_documents.iter_texts("test") for text in batch)
    examples = fill_mask_report(trained, tokenizer, evaluation.fill_mask_sentences, held_out_texts,
                                evaluation.fill_mask_count, evaluation.seed, evaluation.top_k)
    # The run summary logs the headline and the before/after sentences (bert_mlm.hooks.summary.NodeTimingHook), once
    return replace(scored, model_version=trained_model.version, fill_mask_examples=examples,
                   extra_corpus_path=redact(evaluation.corpus_path) if extra is not None else None)


def replay_held_out(corpus: CorpusConfig, extra_path: str | None) -> tuple[dict, str] | None:
    """The split whose held-out side the extra corpus is scored on, when it is the replayed file."""
    held_out_of = corpus.held_out_of_replay(extra_path)
    if held_out_of is not None:
        logger.info("evaluation.corpus_path is corpus.replay's file: scored on its held-out side only (the "
                    "documents the hash split keeps out of training), disjoint from the replayed text")
    return held_out_of


def source_name(path: str | None) -> str:
    """A corpus as the before/after sentence names it: its file or folder name (a full path
    rarely reads well in a sentence; a URL's query may hold a signature)."""
    path = redact(str(path)).split("?")[0].rstrip("/")
    return PurePosixPath(path).name or path
