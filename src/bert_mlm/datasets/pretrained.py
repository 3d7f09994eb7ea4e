"""Versioned Hugging Face ``save_pretrained`` directories as Kedro datasets.

kedro-datasets' Hugging Face datasets load from the Hub; these save and load local directories
that plain ``transformers`` opens (``AutoTokenizer`` / ``AutoModelForMaskedLM`` /
``pipeline("fill-mask", model=dir)``). Saves are atomic: the directory is written under a
temporary name and renamed, so a crash never leaves a half-written version that loads.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractVersionedDataset, DatasetError, Version
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class MaskedLM:
    """A masked language model and its tokenizer, saved together in one directory."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase


class _PretrainedDirectoryDataset(AbstractVersionedDataset):
    def __init__(self, filepath: str, version: Version | None = None, metadata: dict[str, Any] | None = None):
        super().__init__(PurePosixPath(Path(filepath).as_posix()), version)
        self.metadata = metadata

    def _write(self, objects: list[Any]) -> None:
        final = Path(str(self._get_save_path()))
        temporary = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        try:
            for obj in objects:
                obj.save_pretrained(str(temporary))
            if final.exists():
                shutil.rmtree(final)
            os.replace(temporary, final)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise

    def _load_dir(self) -> str:
        path = Path(str(self._get_load_path()))
        if not path.is_dir():
            raise DatasetError(f"{path} is not a saved directory")
        return str(path)

    def _exists(self) -> bool:
        try:
            return Path(str(self._get_load_path())).is_dir()
        except DatasetError:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}


class TokenizerDataset(_PretrainedDirectoryDataset):
    """A tokenizer directory (``tokenizer.json`` and configs) loaded with ``AutoTokenizer``."""

    def load(self) -> PreTrainedTokenizerBase:
        return AutoTokenizer.from_pretrained(self._load_dir())

    def save(self, data: PreTrainedTokenizerBase) -> None:
        self._write([data])


class MaskedLMDataset(_PretrainedDirectoryDataset):
    """A model directory (safetensors weights, config, and the tokenizer inside)."""

    def load(self) -> MaskedLM:
        directory = self._load_dir()
        return MaskedLM(
            model=AutoModelForMaskedLM.from_pretrained(directory),
            tokenizer=AutoTokenizer.from_pretrained(directory),
        )

    def save(self, data: MaskedLM) -> None:
        self._write([data.model, data.tokenizer])
