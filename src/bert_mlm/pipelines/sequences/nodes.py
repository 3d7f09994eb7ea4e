"""Nodes of the ``sequences`` pipeline: the token store -> an index of model-input sequences."""

from __future__ import annotations

import hashlib
import logging

import pandas as pd
from transformers import PreTrainedTokenizerFast

from bert_mlm.config import (
    DataConfig,
    EvaluationParameters,
    MaskingConfig,
    SequenceConfig,
    TrainingConfig,
    TuningConfig,
    whole_word_requested,
)
from bert_mlm.core.data.corpus import SPLITS
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.reuse import code_digest
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import SequenceIndex, build_sequence_index, sequence_stats
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.tokens.words import SEGMENTER_SAMPLE_CHARS, WORD_SCHEMES, stored_word_segmenter
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


def build_model_inputs(
    token_store: TokenStore,
    tokenizer: PreTrainedTokenizerFast,
    corpus_documents: DocumentShards,
    config: SequenceConfig,
    training: TrainingConfig,
    masking: MaskingConfig,
    evaluation: EvaluationParameters,
    tuning: TuningConfig,
    data: DataConfig,
) -> tuple[SequenceIndex, pd.DataFrame]:
    """Pack or split each split's documents into sequences of at most ``sequences.max_length``.

    Returns an index into the token store (no token is copied) and per-split stats with the
    padding efficiency of the chosen padding mode at the training batch size. For whole-word
    masking on jieba words, the index also gets each token's word boundary (written beside it).
    """
    token_store.check_tokenizer(tokenizer.get_vocab())
    for split in SPLITS:  # indexing follows the document offsets: damaged ones are one line, here
        token_store.verify_offsets(split)
    segmenter, stored = stored_word_segmenter(masking.word_segmenter, whole_word_requested(masking, evaluation, tuning),
                                              corpus_documents.sample_texts("train", SEGMENTER_SAMPLE_CHARS))
    if stored is not None and (token_store.word_segmenter, token_store.word_scheme) != (stored, WORD_SCHEMES[stored]):
        held = f"{token_store.word_segmenter} words" if token_store.word_segmenter else "no word boundaries"
        raise UserError(
            f"masking.whole_word: whole-word masking on {stored} words needs the token store to hold them, and "
            f"{str(token_store.directory)!r} holds {held} (encoded with other masking settings); run the "
            "tokenization pipeline again with these parameters (`kedro run` reruns only what changed)")
    logger.info("Word boundaries for whole-word masking: %s%s", segmenter,
                "" if segmenter == "wordpiece" or stored else " (not segmented: no whole-word masking asked for)")
    index = build_sequence_index(token_store, config, SPLITS, segmenter, store_words=stored is not None)
    index.reuse, index.recipe = data.reuse, {
        "stage": "sequence_index", "code": code_digest("bert_mlm.core.tokens.sequences", "bert_mlm.core.tokens.words"),
        "store": {split: [token_store.digest(split), token_store.manifest["splits"][split].get("offsets_digest")]
                  for split in SPLITS},
        "sources": token_store.sources, "mode": config.mode, "max_length": config.max_length,
        "word_segmenter": segmenter, "words": WORD_SCHEMES[stored] if stored else None,
        "tokenizer": hashlib.blake2b(tokenizer.backend_tokenizer.to_str().encode(), digest_size=10).hexdigest(),
    }
    collator = TokenIds.from_tokenizer(tokenizer).collator(config.max_length, config.padding)
    stats = pd.DataFrame(sequence_stats(index, token_store, collator, training.batch_size, training.bucketing))
    counts = dict(zip(stats["split"], stats["sequences"], strict=True))
    if counts["train"] == 0:
        raise UserError("sequences: the train split produced no sequence; the corpus is too small")
    for split in (s for s in ("valid", "test") if counts[s] == 0):
        logger.warning("sequences: the %s split is empty; tuning (valid) and evaluation (test) need it", split)
    logger.info("Sequences per split: %s", counts)
    return index, stats
