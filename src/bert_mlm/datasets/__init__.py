"""Kedro datasets of this project (Hugging Face directories, corpus sources, token arrays)."""

from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.pretrained import MaskedLMDataset, TokenizerDataset

__all__ = ["CorpusDataset", "MaskedLMDataset", "TokenizerDataset"]
