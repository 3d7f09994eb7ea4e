"""Kedro datasets of this project (Hugging Face directories, corpus sources, the data path, parameter sections,
the stages' typed results, the run record and the model card)."""

from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.data import DocumentShardsDataset, SequenceIndexDataset, TokenStoreDataset
from bert_mlm.datasets.pretrained import ClassifierDataset, MaskedLMDataset, ModelCardDataset, TokenizerDataset
from bert_mlm.datasets.results import ResultDataset
from bert_mlm.datasets.run_record import RunRecordDataset
from bert_mlm.datasets.sections import SectionDataset

__all__ = ["ClassifierDataset", "CorpusDataset", "DocumentShardsDataset", "MaskedLMDataset", "ModelCardDataset",
           "ResultDataset", "RunRecordDataset", "SectionDataset", "SequenceIndexDataset", "TokenStoreDataset",
           "TokenizerDataset"]
