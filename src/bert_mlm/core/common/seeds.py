"""Seeds of the project's random streams: every random draw is a pure function of (seed, stream,
epoch, rank, batch), so that a rerun or a resumed run draws the same masks, orders and samples.

One place for the streams, so that two uses never share one by accident.
"""

from __future__ import annotations

import numpy as np

MASK_STREAM = 0  # training masks, per batch
ORDER_STREAM = 1  # the order of an epoch's batches
DROPOUT_STREAM = 2  # the global generators at the start of training (dropout)
EVALUATION_STREAM = 3  # the fixed protocol's masks
EVALUATION_ORDER_STREAM = 5  # the order in which held-out sequences are visited
MIXTURE_STREAM = 6  # a mixture's per-source draws of an epoch


def stream_seed(seed: int, epoch: int, batch_index: int, rank: int = 0, stream: int = MASK_STREAM) -> int:
    """A well-mixed 63-bit seed for one batch of one stream; neighbouring inputs give unrelated
    streams (NumPy's ``SeedSequence``)."""
    state = np.random.SeedSequence([int(seed), int(stream), int(epoch), int(rank), int(batch_index)]).generate_state(2)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)
