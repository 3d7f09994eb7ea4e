"""Kedro datasets of this project (Hugging Face directories, corpus sources, the data path)."""

from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.data import DocumentShardsDataset, SequenceIndexDataset, TokenStoreDataset
from bert_mlm.datasets.pretrained import ClassifierDataset, MaskedLMDataset, TokenizerDataset

__all__ = [
    "ClassifierDataset",
    "CorpusDataset",
    "DocumentShardsDataset",
    "MaskedLMDataset",
    "SequenceIndexDataset",
    "TokenStoreDataset",
    "TokenizerDataset",
]
