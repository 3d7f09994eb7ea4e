"""State (nested dicts, lists, tuples, numbers, tensors, numpy arrays) as JSON plus safetensors.

Checkpoints and the RNG states gathered from other ranks are read back without unpickling:
loading a pickle runs whatever code it names, so a checkpoint copied from elsewhere, or bytes
from the network, could execute anything. JSON and safetensors only describe data.

``flatten`` replaces every tensor and array by a reference (tuples and dicts with non-string keys
tagged, so that they come back as they went in); ``unflatten`` reverses it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import safetensors.torch
import torch

_TENSOR, _ARRAY, _TUPLE, _ITEMS = "__tensor__", "__ndarray__", "__tuple__", "__items__"


def flatten(state: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    tensors: dict[str, torch.Tensor] = {}

    def encode(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            key = str(len(tensors))
            # A copy: safetensors refuses tensors that share storage (tied embeddings do).
            tensors[key] = value.detach().cpu().contiguous().clone()
            return {_TENSOR: key}
        if isinstance(value, np.ndarray):
            key = str(len(tensors))
            # As bytes: numpy has dtypes (uint32 for its RNG state) that torch tensors lack.
            tensors[key] = torch.from_numpy(np.ascontiguousarray(value).reshape(-1).view(np.uint8).copy())
            return {_ARRAY: key, "dtype": value.dtype.str, "shape": list(value.shape)}
        if isinstance(value, dict):
            if all(isinstance(name, str) for name in value):
                return {name: encode(item) for name, item in value.items()}
            return {_ITEMS: [[encode(name), encode(item)] for name, item in value.items()]}
        if isinstance(value, tuple):
            return {_TUPLE: [encode(item) for item in value]}
        if isinstance(value, list):
            return [encode(item) for item in value]
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"state_codec: cannot store a {type(value).__name__} without pickling it")

    return encode(state), tensors


def unflatten(structure: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(structure, list):
        return [unflatten(item, tensors) for item in structure]
    if not isinstance(structure, dict):
        return structure
    if _TENSOR in structure:
        return tensors[structure[_TENSOR]]
    if _ARRAY in structure:
        data = tensors[structure[_ARRAY]].numpy()
        return data.view(np.dtype(structure["dtype"])).reshape(structure["shape"]).copy()
    if _TUPLE in structure:
        return tuple(unflatten(item, tensors) for item in structure[_TUPLE])
    if _ITEMS in structure:
        return {_hashable(unflatten(name, tensors)): unflatten(item, tensors) for name, item in structure[_ITEMS]}
    return {name: unflatten(item, tensors) for name, item in structure.items()}


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def to_bytes(state: Any) -> bytes:
    """One self-describing byte string: safetensors, with the structure in its metadata."""
    structure, tensors = flatten(state)
    return safetensors.torch.save(tensors, metadata={"structure": json.dumps(structure)})


def from_bytes(data: bytes) -> Any:
    # The safetensors layout: an 8-byte little-endian header length, then the JSON header.
    header_length = int.from_bytes(data[:8], "little")
    structure = json.loads(json.loads(data[8 : 8 + header_length])["__metadata__"]["structure"])
    return unflatten(structure, safetensors.torch.load(data))
