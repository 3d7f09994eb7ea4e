"""Nodes of the ``ingestion`` pipeline: raw texts -> cleaned, de-duplicated, split document shards."""

from __future__ import annotations

import logging

import pandas as pd

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.sources import CorpusSource, as_corpus_source

logger = logging.getLogger(__name__)


def clean_and_split_corpus(raw_corpus: CorpusSource | object, corpus: CorpusConfig, data: DataConfig) -> DocumentStream:
    """Clean the raw texts (the project's corpus dataset, or what any Kedro dataset loads: a
    DataFrame, partitions, texts) into documents, each given a split by its hash. Returns the work:
    the ``corpus_documents`` dataset runs it while writing, so the corpus is never held in memory.
    """
    return DocumentStream(source=as_corpus_source(raw_corpus, corpus.text_column), config=corpus, data=data)


def summarise_corpus(corpus_documents: DocumentShards) -> pd.DataFrame:
    """Documents, characters and sources per split; replaced bytes; duplicates and short items
    dropped; a mixture's sources (``DocumentShards.stats``)."""
    stats, cleaning = corpus_documents.stats(), corpus_documents.manifest["cleaning"]
    logger.info("Corpus: %d documents from %d source(s); %d duplicates and %d short items dropped; %d undecodable "
                "bytes replaced", stats.set_index("split").loc["all", "documents"], cleaning["sources"],
                cleaning["duplicates_dropped"], cleaning["short_dropped"], cleaning["replaced_bytes"])
    for name, info in (corpus_documents.sources or {}).items():
        logger.info("Corpus source %s: %d training documents, %d characters (stored once; training draws it by "
                    "its weight)", name, info["train_documents"], info["train_characters"])
    return stats
