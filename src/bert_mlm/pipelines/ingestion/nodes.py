"""Nodes of the ``ingestion`` pipeline: raw texts -> cleaned, de-duplicated, split documents."""

from __future__ import annotations

import logging

import pandas as pd

from bert_mlm.core.corpus import CorpusConfig, CorpusError, RawText, assign_splits, clean_documents, corpus_stats
from bert_mlm.core.params import build_config

logger = logging.getLogger(__name__)


def clean_and_split_corpus(raw_corpus: pd.DataFrame, corpus_params: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Clean the raw texts into documents and assign each a split by its hash.

    Returns the documents (``source``, ``text``, ``doc_hash``, ``split``) and a stats table
    (documents, characters and sources per split; replaced bytes; duplicates dropped).
    """
    config = build_config(CorpusConfig, corpus_params, "corpus")
    items = (
        RawText(source=r.source, text=r.text, replaced_bytes=int(r.replaced_bytes), is_document=bool(r.is_document))
        for r in raw_corpus.itertuples(index=False)
    )
    documents, report = clean_documents(items, config.min_chars, config.deduplicate, config.max_document_chars)
    if documents.empty:
        raise CorpusError(
            f"corpus.path: the corpus is empty after cleaning ({report.raw_items} raw item(s), "
            f"{report.dropped_short} shorter than corpus.min_chars={config.min_chars})"
        )
    documents["split"] = assign_splits(documents["doc_hash"].tolist(), config.split_ratios, config.split_salt)
    if not (documents["split"] == "train").any():
        raise CorpusError(
            f"corpus.path: the corpus is too small: none of its {len(documents)} document(s) landed in "
            "the train split (corpus.split_ratios); add text"
        )
    stats = corpus_stats(documents, report)
    logger.info(
        "Corpus: %d documents from %d source(s); %d duplicates and %d short items dropped; "
        "%d undecodable bytes replaced",
        len(documents), report.sources, report.dropped_duplicates, report.dropped_short, report.replaced_bytes,
    )
    return documents, stats
