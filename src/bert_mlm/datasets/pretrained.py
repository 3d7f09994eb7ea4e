"""Versioned Hugging Face ``save_pretrained`` directories as Kedro datasets.

kedro-datasets' Hugging Face datasets load from the Hub; these save and load local directories
that plain ``transformers`` opens, atomically (:class:`~bert_mlm.datasets.directory.AtomicDirectoryDataset`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import AbstractDataset
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from bert_mlm.core.common.files import written_then_renamed
from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.core.record.model_card import ModelCard
from bert_mlm.core.tokens.tokenization import TokenizerJob
from bert_mlm.datasets.directory import AtomicDirectoryDataset


@dataclass
class MaskedLM:
    """A masked language model and its tokenizer, saved together in one directory; ``version``: the
    run that saved it (set on load; None for a model made in this process)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    version: str | None = None


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
        with MODEL_LOCK:  # not thread-safe in transformers (core.model.construction)
            model = AutoModelForMaskedLM.from_pretrained(directory)
        return MaskedLM(model, AutoTokenizer.from_pretrained(directory),
                        self.resolve_load_version() if self._version else None)

    def save(self, data: MaskedLM) -> None:
        self._write([data.model, data.tokenizer])


@dataclass
class Classifier:
    """Fine-tuned models (each config carries its label mapping) by task name (``""``: the one task
    of ``finetune.train_path``) and their tokenizer; neither where nothing was fine-tuned."""

    models: dict[str, PreTrainedModel] = field(default_factory=dict)
    tokenizer: PreTrainedTokenizerBase | None = None

    @property
    def model(self) -> PreTrainedModel | None:
        """The one task's model (the first where there are several)."""
        return next(iter(self.models.values()), None)


class ClassifierDataset(_PretrainedDirectoryDataset):
    """Fine-tuned models: the one task's directory, or a folder per task (``finetune.tasks``), each
    a plain ``transformers`` directory. Without ``finetune.save_model`` a version holds a note saying
    so, so that the newest version is always the newest fine-tuning's; no fine-tuning writes none."""

    NOT_KEPT = "NOT_KEPT.txt"

    def holds_nothing(self, data: Classifier) -> bool:
        return not data.models and data.tokenizer is None

    def load(self) -> Classifier:
        directory = self._load_dir()
        if (directory / self.NOT_KEPT).exists():
            return Classifier()
        folders = {"": directory} if (directory / "config.json").is_file() else {
            path.name: path for path in sorted(directory.iterdir()) if (path / "config.json").is_file()}
        return Classifier({name: _classifier(folder) for name, folder in folders.items()},
                          AutoTokenizer.from_pretrained(str(next(iter(folders.values())))))

    def save(self, data: Classifier) -> None:
        def fill(directory: Path) -> None:
            directory.mkdir(parents=True)
            if not data.models:
                (directory / self.NOT_KEPT).write_text(
                    "The fine-tuned weights were not kept: set finetune.save_model=true.\n")
            for name, model in data.models.items():
                model.save_pretrained(str(directory / name))
                data.tokenizer.save_pretrained(str(directory / name))

        self._write_directory(fill)


def _classifier(directory: Path) -> PreTrainedModel:
    architectures = AutoConfig.from_pretrained(str(directory)).architectures or []
    auto = AutoModelForTokenClassification if any("TokenClassification" in name for name in architectures) else \
        AutoModelForSequenceClassification
    with MODEL_LOCK:  # not thread-safe in transformers (core.model.construction)
        return auto.from_pretrained(str(directory))


class ModelCardDataset(AbstractDataset[ModelCard, str]):
    """A trained model's card, ``README.md`` in the model's own folder (``filepath``: the model
    dataset's), written atomically into the version it names, replacing an earlier card: the folder
    can be uploaded to the Hub as it is. A card of no saved model writes nothing. Loads the newest."""

    FILENAME = "README.md"

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = PurePosixPath(Path(filepath).as_posix())
        self.metadata = metadata

    def _folder(self, version: str) -> Path:
        return Path(str(self._filepath)) / version / self._filepath.name

    def written_path(self, data: ModelCard) -> Path | None:
        """Where ``data`` was written (None: nowhere)."""
        if data.model_version is None:
            return None
        path = self._folder(data.model_version) / self.FILENAME
        return path if path.is_file() else None

    def save(self, data: ModelCard) -> None:
        if data.model_version is None:
            return
        folder = self._folder(data.model_version)
        if not folder.is_dir():  # the model's version was deleted: nothing to describe
            self._logger.warning("model card: no model folder %s; no card written", folder)
            return
        with written_then_renamed(folder / self.FILENAME) as temporary:
            temporary.write_text(data.text, encoding="utf-8")

    def load(self) -> str:
        root = Path(str(self._filepath))
        versions = sorted((p.name for p in root.iterdir() if (self._folder(p.name) / self.FILENAME).is_file()),
                          reverse=True) if root.is_dir() else []
        if not versions:
            raise FileNotFoundError(f"no model card under {root}")
        return (self._folder(versions[0]) / self.FILENAME).read_text(encoding="utf-8")

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
