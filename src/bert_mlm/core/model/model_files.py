"""A model directory's files, checked without loading the model: a ``config.json`` and weights, every
weight file readable (a safetensors header; a ``pytorch_model.bin`` through the weights-only loader
onto the meta device, which refuses a pickle that names code), every tensor of its config's shape.
A broken model fails here in one line naming the file, not after the data stages."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.errors import UserError, first_line


class CheckpointNotFound(UserError, FileNotFoundError):
    """A model path that is missing, a file, or a directory without a model; one line says which."""


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def check_model_directory(text: str, what: str = "model.init_from") -> Path:
    """``text`` as a model directory, or one line saying what is missing there."""
    path = Path(text).expanduser()
    if not path.exists():
        existing = next((parent for parent in path.absolute().parents if parent.exists()), None)
        raise CheckpointNotFound(f"{what}: {text!r} does not exist (the nearest existing folder is {str(existing)!r})")
    if not path.is_dir():
        raise CheckpointNotFound(f"{what}: {text!r} is a file, not a model directory (a folder with config.json and "
                                 "model.safetensors, as a trained model version or save_pretrained writes it)")
    if not (path / "config.json").is_file():
        raise CheckpointNotFound(f"{what}: {text!r} is not a model directory (no config.json there)")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise CheckpointNotFound(f"{what}: {text!r} is not a model directory: it has a config.json but no weights "
                                 f"({' or '.join(WEIGHT_FILES[::2])})")
    return path


def check_weights(directory: Path, what: str = "model.init_from") -> None:
    """The directory's ``config.json`` read as a BERT config and every weight file's tensor shapes
    checked against it (not their values): one line naming the file if not."""
    config = _config_of(directory, what)
    expected = _expected_shapes(config)
    found: dict[str, tuple[int, ...]] = {}
    for file in _weight_files(directory, what):
        found.update(_tensor_shapes(file, what))
    matched = 0
    for key, shape in found.items():
        model_key = _model_key(key, expected)
        if model_key is None:
            continue
        matched += 1
        if tuple(expected[model_key]) != tuple(shape):
            raise UserError(f"{what}: the weights of {str(directory)!r} do not fit its config.json: {key!r} has shape "
                            f"{list(shape)}, the config makes it {list(expected[model_key])} (a config.json from "
                            "another model?)")
    if found and not matched:
        raise UserError(f"{what}: {str(directory)!r} holds no weight of a BERT model (its tensors are named "
                        f"{', '.join(repr(k) for k in list(found)[:3])} ...)")


def _config_of(directory: Path, what: str) -> BertConfig:
    path = directory / "config.json"
    try:
        json.loads(path.read_text(encoding="utf-8"))
        return BertConfig.from_pretrained(str(directory))
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"{what}: {str(path)!r} is not a readable model config ({first_line(error)})") from error


def _weight_files(directory: Path, what: str) -> list[Path]:
    """The weight files loading would read: the safetensors file(s) when present, else the .bin(s);
    a sharded index lists its shards, each of which must be there."""
    for single, index in (WEIGHT_FILES[:2], WEIGHT_FILES[2:]):
        if (directory / single).is_file():
            return [directory / single]
        if (directory / index).is_file():
            try:
                shards = sorted(set(json.loads((directory / index).read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
                raise UserError(f"{what}: {str(directory / index)!r} is not a readable shard index "
                                f"({error})") from error
            missing = [shard for shard in shards if not (directory / shard).is_file()]
            if missing:
                raise UserError(f"{what}: {str(directory / index)!r} lists {len(shards)} weight file(s), "
                                f"of which {', '.join(map(repr, missing[:3]))} is missing")
            return [directory / shard for shard in shards]
    return []


def _tensor_shapes(file: Path, what: str) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, read without loading a tensor; one line for a file that cannot be."""
    if file.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(file), framework="pt") as handle:
                return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}
        except (OSError, SafetensorError) as error:
            raise UserError(f"{what}: the weights {str(file)!r} are unreadable ({first_line(error)}; "
                            "truncated, or not a safetensors file?)") from error
    try:
        try:
            state = torch.load(file, map_location="meta", weights_only=True, mmap=True)
        except OSError:  # a truncated zip cannot be memory-mapped: read it plainly, for the reason
            state = torch.load(file, map_location="meta", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(f"{what}: {str(file)!r} is a pickle that names code or objects other than tensors, which the "
                        "weights-only loader refuses (unpickling it could run anything). Convert it where you trust "
                        "it: BertForMaskedLM.from_pretrained(dir).save_pretrained(dir) writes model.safetensors"
                        ) from error
    except (OSError, RuntimeError, EOFError, ValueError) as error:
        raise UserError(f"{what}: the weights {str(file)!r} are unreadable ({first_line(error)}; "
                        "truncated?)") from error
    if not isinstance(state, dict):
        raise UserError(f"{what}: {str(file)!r} holds a {type(state).__name__}, not a state dict of tensors")
    return {key: tuple(value.shape) for key, value in state.items() if isinstance(value, torch.Tensor)}


def _expected_shapes(config: BertConfig) -> dict[str, torch.Size]:
    with MODEL_LOCK, torch.device("meta"):  # no memory, no initialisation: the shapes alone
        model = BertForMaskedLM(config)
    return {key: value.shape for key, value in model.state_dict().items()}


def _model_key(key: str, expected: dict) -> str | None:
    """``key`` as BertForMaskedLM names it (a bare BertModel's keys lack ``bert.``; TF-era
    checkpoints say gamma/beta for LayerNorm weight/bias), or None for a tensor it does not have."""
    key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    return next((candidate for candidate in (key, f"bert.{key}") if candidate in expected), None)
