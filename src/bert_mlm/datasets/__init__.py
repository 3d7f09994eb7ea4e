"""Kedro datasets of this project (Hugging Face directories, corpus sources, the data path, parameter sections,
the tuning record)."""

from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.data import DocumentShardsDataset, SequenceIndexDataset, TokenStoreDataset
from bert_mlm.datasets.pretrained import ClassifierDataset, MaskedLMDataset, TokenizerDataset
from bert_mlm.datasets.sections import SectionDataset
from bert_mlm.datasets.tuning_record import TuningRecordDataset

__all__ = [
    "ClassifierDataset",
    "CorpusDataset",
    "DocumentShardsDataset",
    "MaskedLMDataset",
    "SectionDataset",
    "SequenceIndexDataset",
    "TokenStoreDataset",
    "TokenizerDataset",
    "TuningRecordDataset",
]
