"""Nodes of the ``ingestion`` pipeline: raw texts -> cleaned, de-duplicated, split document shards."""

from __future__ import annotations

import logging

import pandas as pd

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.data.documents import DocumentShards, DocumentStream
from bert_mlm.core.data.sources import CorpusSource, as_corpus_source

logger = logging.getLogger(__name__)


def clean_and_split_corpus(raw_corpus: CorpusSource | object, corpus: CorpusConfig, data: DataConfig) -> DocumentStream:
    """Clean the raw texts into documents and assign each a split by its hash.

    ``raw_corpus`` is the project's corpus dataset, or what any Kedro dataset declared as
    ``raw_corpus`` loads (a DataFrame, a PartitionedDataset's partitions, texts).
    Returns the work, not the documents: the ``corpus_documents`` dataset runs it while writing
    its shards, chunk by chunk (on ``data.engine``), so the corpus is never held in memory.
    """
    return DocumentStream(source=as_corpus_source(raw_corpus, corpus.text_column), config=corpus, data=data)


def summarise_corpus(corpus_documents: DocumentShards) -> pd.DataFrame:
    """Documents, characters and sources per split; replaced bytes; duplicates and short items dropped."""
    stats = corpus_documents.stats()
    cleaning = corpus_documents.manifest["cleaning"]
    logger.info(
        "Corpus: %d documents from %d source(s); %d duplicates and %d short items dropped; "
        "%d undecodable bytes replaced",
        stats.iloc[-1]["documents"], cleaning["sources"], cleaning["duplicates_dropped"],
        cleaning["short_dropped"], cleaning["replaced_bytes"],
    )
    # The cleaning counts are the corpus's, not a split's: on the "all" row only, not repeated on
    # every split's (empty cells in the CSV). DocumentShards.stats is left as its other callers use it.
    totals = ["replaced_bytes", "duplicates_dropped", "short_dropped"]
    stats[totals] = stats[totals].astype("Int64")
    stats.loc[stats["split"] != "all", totals] = pd.NA
    sources = corpus_documents.source_stats()
    if sources is not None:  # a mixture: each source's training documents, stored once (weights apply per epoch)
        for row in sources.itertuples():
            logger.info("Corpus source %s: %d training documents, %d characters (stored once; training draws it by "
                        "its weight)", row.source, row.train_documents, row.train_characters)
        stats = pd.concat([stats, sources.assign(split="train:" + sources["source"])], ignore_index=True)
    return stats
