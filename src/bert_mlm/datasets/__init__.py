"""Kedro datasets of this project (Hugging Face directories, corpus sources, the data path, the tuning result)."""

from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.data import DocumentShardsDataset, SequenceIndexDataset, TokenStoreDataset
from bert_mlm.datasets.pretrained import ClassifierDataset, MaskedLMDataset, TokenizerDataset
from bert_mlm.datasets.tuning_result import TuningResultDataset

__all__ = [
    "ClassifierDataset",
    "CorpusDataset",
    "DocumentShardsDataset",
    "MaskedLMDataset",
    "SequenceIndexDataset",
    "TokenStoreDataset",
    "TokenizerDataset",
    "TuningResultDataset",
]
