"""Model-input sequences: packing or per-document splitting, padding, collation, bucketing.

Sequences are stored unpadded (each one starts with ``[CLS]``); padding and attention masks are
made per batch by :class:`Collator`, so the same stored sequences serve static padding (the
tutorial's ``max_length`` padding) and dynamic padding to a multiple of 8 without re-running the
stage.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

MODES = ("packed", "document")
PADDINGS = ("static", "dynamic")
MIN_MAX_LENGTH = 8


@dataclass(frozen=True)
class SequenceConfig:
    mode: str = "packed"
    padding: str = "dynamic"
    max_length: int = 128

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"sequences.mode: {self.mode!r} is not one of {MODES}")
        if self.padding not in PADDINGS:
            raise ValueError(f"sequences.padding: {self.padding!r} is not one of {PADDINGS}")
        if not isinstance(self.max_length, int) or self.max_length < MIN_MAX_LENGTH:
            raise ValueError(f"sequences.max_length: {self.max_length!r} must be an integer >= {MIN_MAX_LENGTH}")

    def check_fits(self, max_position_embeddings: int) -> None:
        if self.max_length > max_position_embeddings:
            raise ValueError(
                f"sequences.max_length: {self.max_length} exceeds model.max_position_embeddings "
                f"({max_position_embeddings})"
            )


def pack_documents(
    documents: Sequence[np.ndarray], max_length: int, cls_id: int, sep_id: int
) -> list[np.ndarray]:
    """Concatenate documents with ``[SEP]`` after each, cut into blocks that start with ``[CLS]``.

    Every token is kept: the final block is shorter when the stream does not divide evenly.
    """
    if not documents:
        return []
    stream_parts = []
    for doc in documents:
        stream_parts.append(doc)
        stream_parts.append(np.array([sep_id], dtype=np.int32))
    stream = np.concatenate(stream_parts).astype(np.int32, copy=False)
    body = max_length - 1
    blocks = []
    for start in range(0, len(stream), body):
        block = np.empty(min(body, len(stream) - start) + 1, dtype=np.int32)
        block[0] = cls_id
        block[1:] = stream[start : start + body]
        blocks.append(block)
    return blocks


def split_documents(
    documents: Sequence[np.ndarray], max_length: int, cls_id: int, sep_id: int
) -> list[np.ndarray]:
    """One document per sequence, ``[CLS] doc [SEP]``; long documents become several sequences."""
    body = max_length - 2
    sequences = []
    for doc in documents:
        for start in range(0, max(len(doc), 1), body):
            piece = doc[start : start + body]
            if len(piece) == 0:
                continue
            sequences.append(np.concatenate(([cls_id], piece, [sep_id])).astype(np.int32))
    return sequences


def build_sequences(
    documents: Sequence[np.ndarray], mode: str, max_length: int, cls_id: int, sep_id: int
) -> list[np.ndarray]:
    builder = pack_documents if mode == "packed" else split_documents
    return builder(documents, max_length, cls_id, sep_id)


def padded_length(length: int, multiple: int = 8) -> int:
    return -(-length // multiple) * multiple


@dataclass
class Collator:
    """Pads a list of sequences into ``input_ids``, ``attention_mask``, ``special_tokens_mask``.

    ``static`` pads to ``max_length``; ``dynamic`` pads to the longest sequence of the batch,
    rounded up to a multiple of 8 (tensor-core friendly shapes on GPUs).
    """

    pad_id: int
    special_ids: Sequence[int]
    max_length: int
    padding: str = "dynamic"

    def __post_init__(self) -> None:
        self._special = np.asarray(sorted(set(self.special_ids)), dtype=np.int64)

    def __call__(self, sequences: Sequence[np.ndarray]) -> dict[str, torch.Tensor]:
        # Built in NumPy and handed to torch without a copy: 5x faster than filling torch
        # tensors row by row (bench/run_all.py --sections masking).
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        longest = int(lengths.max())
        if longest > self.max_length:
            raise ValueError(f"a sequence of {longest} tokens exceeds max_length {self.max_length}")
        width = self.max_length if self.padding == "static" else min(padded_length(longest), self.max_length)
        input_ids = np.full((len(sequences), width), self.pad_id, dtype=np.int64)
        for row, seq in enumerate(sequences):
            input_ids[row, : len(seq)] = seq
        attention_mask = np.arange(width)[None, :] < lengths[:, None]
        special = np.isin(input_ids, self._special) | ~attention_mask
        return {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(attention_mask.astype(np.int64)),
            "special_tokens_mask": torch.from_numpy(special.astype(np.int64)),
        }


def batch_order(
    lengths: Sequence[int],
    batch_size: int,
    generator: torch.Generator | None,
    bucketed: bool,
    bucket_batches: int = 50,
) -> list[list[int]]:
    """Indices of each batch of one epoch.

    Shuffled with ``generator`` (``None`` keeps the stored order, for evaluation). With
    ``bucketed``, each window of ``bucket_batches`` batches is sorted by length before it is cut,
    so batches hold similar lengths (less padding) while the epoch stays shuffled.
    """
    n = len(lengths)
    order = torch.randperm(n, generator=generator).tolist() if generator is not None else list(range(n))
    if bucketed:
        window = batch_size * bucket_batches
        lengths_array = np.asarray(lengths)
        order = [
            i
            for start in range(0, n, window)
            for i in sorted(order[start : start + window], key=lambda k: -lengths_array[k])
        ]
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if bucketed and generator is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return batches


def padding_efficiency(lengths: Sequence[int], batches: Sequence[Sequence[int]], collator: Collator) -> float:
    """Real tokens / all tokens over the given batches, as the collator would pad them."""
    real = 0
    total = 0
    for batch in batches:
        batch_lengths = [lengths[i] for i in batch]
        width = (
            collator.max_length
            if collator.padding == "static"
            else min(padded_length(max(batch_lengths)), collator.max_length)
        )
        real += sum(batch_lengths)
        total += width * len(batch)
    return real / total if total else 0.0


def iterate_batches(
    sequences: Sequence[np.ndarray], batches: Sequence[Sequence[int]], collator: Collator
) -> Iterator[dict[str, torch.Tensor]]:
    for batch in batches:
        yield collator([sequences[i] for i in batch])
