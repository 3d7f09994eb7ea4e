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

from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from bert_mlm.core.tokenizer import TokenizerJob
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

    def save(self, data: PreTrainedTokenizerBase | TokenizerJob) -> None:
        if not isinstance(data, TokenizerJob):
            self._write([data])
            return

        def train(directory: Path) -> None:
            tokenizer = data.build()
            directory.mkdir(parents=True)
            tokenizer.save_pretrained(str(directory))

        self._write_reusing(train, data.recipe(), data.data.reuse,
                            check=lambda directory: AutoTokenizer.from_pretrained(str(directory)))


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


@dataclass
class Classifier:
    """A fine-tuned sequence classifier (its config carries the label mapping) and its tokenizer;
    ``model`` is None when the weights were not kept (Kedro saves no ``None`` output)."""

    model: PreTrainedModel | None = None
    tokenizer: PreTrainedTokenizerBase | None = None


class ClassifierDataset(_PretrainedDirectoryDataset):
    """A fine-tuned classifier's directory (``AutoModelForSequenceClassification``), written only
    when there is one: without ``finetune.save_model`` a run saves nothing here."""

    NOT_KEPT = "NOT_KEPT.txt"

    def load(self) -> Classifier:
        directory = self._load_dir()
        if (directory / self.NOT_KEPT).exists():
            return Classifier()
        return Classifier(AutoModelForSequenceClassification.from_pretrained(str(directory)),
                          AutoTokenizer.from_pretrained(str(directory)))

    def save(self, data: Classifier) -> None:
        if data.model is not None:
            self._write([data.model, data.tokenizer])
            return

        def note(directory: Path) -> None:
            # A version must exist once saved (Kedro checks); it says why it holds no weights.
            directory.mkdir(parents=True)
            (directory / self.NOT_KEPT).write_text(
                "The fine-tuned weights were not kept: set finetune.save_model=true.\n"
            )

        self._write_directory(note)
