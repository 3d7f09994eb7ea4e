"""An epoch's batches and what padding costs: the order in which training visits the sequences
(shuffled, optionally bucketed by length), as views into one index array, and the share of real
tokens in the padded batches (the sequences stage's stats)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bert_mlm.core.tokens.sequences import Collator, SequenceIndex, padded_length


class Batches(Sequence):
    """The batches of one epoch: views into one shuffled order (no list per batch).

    ``batches[k]`` is an index array; slicing gives a subset of batches (e.g. one rank's).
    """

    def __init__(self, order: np.ndarray, batch_size: int, picks: np.ndarray):
        self.order, self.batch_size, self.picks = order, batch_size, picks

    def __len__(self) -> int:
        return len(self.picks)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return Batches(self.order, self.batch_size, self.picks[k])
        start = int(self.picks[k]) * self.batch_size
        return self.order[start : start + self.batch_size]

    def tolist(self) -> list[list[int]]:
        return [self[k].tolist() for k in range(len(self))]


def batch_order(lengths: Sequence[int], batch_size: int, generator: torch.Generator | None, bucketed: bool,
                bucket_batches: int = 50) -> Batches:
    """Indices of each batch of one epoch.

    Shuffled with ``generator`` (``None`` keeps the stored order, for evaluation). With
    ``bucketed``, each window of ``bucket_batches`` batches is sorted by length (stable) before it
    is cut, so batches hold similar lengths (less padding) while the epoch stays shuffled.
    Vectorised: 8 bytes per sequence for the order, whatever the corpus size.
    """
    n = len(lengths)
    order = torch.randperm(n, generator=generator).numpy() if generator is not None else np.arange(n)
    if bucketed and n:
        window = batch_size * bucket_batches
        by_length = -np.asarray(lengths, dtype=np.int64)[order]
        order = order[np.lexsort((by_length, np.arange(n) // window))]  # stable, as sorted() was
    n_batches = -(-n // batch_size)
    picks = torch.randperm(n_batches, generator=generator).numpy() if bucketed and generator is not None else None
    return Batches(order, batch_size, np.arange(n_batches) if picks is None else picks)


def padding_efficiency(lengths: Sequence[int], batches: Batches, collator: Collator) -> float:
    """Real tokens / all tokens over the given batches, as the collator would pad them."""
    if not len(batches):
        return 0.0
    # Per batch (in the order of ``batches``): its size, and the sum and maximum of its lengths.
    ordered = np.asarray(lengths)[batches.order].astype(np.int64)
    starts = np.arange(0, len(ordered), batches.batch_size)
    sizes = np.diff(np.append(starts, len(ordered)))[batches.picks]
    sums, maxima = (reduce.reduceat(ordered, starts)[batches.picks] for reduce in (np.add, np.maximum))
    widths = collator.max_length if collator.padding == "static" else np.minimum(padded_length(maxima),
                                                                                    collator.max_length)
    return float(sums.sum() / (widths * sizes).sum())


def sequence_stats(index: SequenceIndex, store, collator: Collator, batch_size: int, bucketing: bool) -> list[dict]:
    """Per split: sequences, tokens, mean length, and the padding efficiency of the chosen
    padding at the training batch size (bucketed batches for the train split when enabled)."""
    rows = []
    for split, split_index in index.splits.items():
        lengths = split_index.lengths
        batches = batch_order(lengths, batch_size, None, bucketed=bucketing and split == "train")
        rows.append({"split": split, "sequences": len(lengths), "tokens": int(lengths.sum()),
                     "document_tokens": int(store.manifest["splits"][split]["document_tokens"]),
                     "mean_length": float(lengths.mean()) if len(lengths) else 0.0,
                     "padding_efficiency": padding_efficiency(lengths, batches, collator), "mode": index.mode,
                     "padding": collator.padding, "max_length": index.max_length})
    for span in index.source_spans() or []:  # a mixture's stored sequences per source (weights apply per epoch)
        lengths = index.splits["train"][span.first:span.stop].lengths
        rows.append({"split": f"train:{span.name}", "sequences": span.stored, "tokens": int(lengths.sum()),
                     "mean_length": float(lengths.mean()) if len(lengths) else 0.0, "mode": index.mode,
                     "max_length": index.max_length})
    return rows
