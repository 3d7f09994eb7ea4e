"""Versioned Hugging Face ``save_pretrained`` directories as Kedro datasets.

kedro-datasets' Hugging Face datasets load from the Hub; these save and load local directories
that plain ``transformers`` opens (``AutoTokenizer`` / ``AutoModelForMaskedLM`` /
``pipeline("fill-mask", model=dir)``). Saves are atomic: the directory is written under a
temporary name and renamed, so a crash never leaves a half-written version that loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from bert_mlm.datasets.directory import AtomicDirectoryDataset


@dataclass
class MaskedLM:
    """A masked language model and its tokenizer, saved together in one directory."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase


class _PretrainedDirectoryDataset(AtomicDirectoryDataset):
    def _write(self, objects: list[Any]) -> None:
        def fill(directory: Path) -> None:
            directory.mkdir(parents=True)
            for obj in objects:
                obj.save_pretrained(str(directory))

        self._write_directory(fill)


class TokenizerDataset(_PretrainedDirectoryDataset):
    """A tokenizer directory (``tokenizer.json`` and configs) loaded with ``AutoTokenizer``."""

    def load(self) -> PreTrainedTokenizerBase:
        return AutoTokenizer.from_pretrained(str(self._load_dir()))

    def save(self, data: PreTrainedTokenizerBase) -> None:
        self._write([data])


class MaskedLMDataset(_PretrainedDirectoryDataset):
    """A model directory (safetensors weights, config, and the tokenizer inside)."""

    def load(self) -> MaskedLM:
        directory = str(self._load_dir())
        return MaskedLM(
            model=AutoModelForMaskedLM.from_pretrained(directory),
            tokenizer=AutoTokenizer.from_pretrained(directory),
        )

    def save(self, data: MaskedLM) -> None:
        self._write([data.model, data.tokenizer])
