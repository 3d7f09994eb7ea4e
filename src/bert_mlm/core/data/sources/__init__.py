"""Corpus sources, read in bounded chunks of :class:`~bert_mlm.core.data.corpus.RawText`, a module per concern
(docs/architecture.md lists them)."""

from bert_mlm.core.data.sources.hf import HFDataset
from bert_mlm.core.data.sources.listing import list_corpus_files
from bert_mlm.core.data.sources.settings import mixture_source, storage_options_of
from bert_mlm.core.data.sources.source import CorpusSource, as_corpus_source, builtin_corpus, read_corpus
from bert_mlm.core.data.sources.streams import decode_text, iter_text_file
from bert_mlm.core.data.sources.tables import iter_table_rows
from bert_mlm.core.data.sources.tasks import ReadTask, read_task, read_tasks

__all__ = ["CorpusSource", "HFDataset", "ReadTask", "as_corpus_source", "builtin_corpus", "decode_text",
           "iter_table_rows", "iter_text_file", "list_corpus_files", "mixture_source", "read_corpus", "read_task",
           "read_tasks", "storage_options_of"]
