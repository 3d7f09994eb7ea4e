"""Span masking: whole-word n-grams (MacBERT, ERNIE) and geometric spans (SpanBERT), drawn so that
each word is masked with the configured probability, exactly in expectation, and spans keep their
lengths' distribution.

Along each row, words are read as a chain of segments: a span of ``n`` words (with probability
``q``; ``n`` drawn from the lengths' distribution: MacBERT 1-4 words with 0.4/0.3/0.2/0.1, SpanBERT
geometric with p = 0.2 clipped at 10) or one unmasked word. Spans never overlap, so a span shows
the length it drew, and a share ``q E[n] / (q E[n] + 1 - q)`` of the words is covered: ``q`` is
solved for the masking probability. The chain starts before the row (a burn-in of words drawn and
discarded), so the first words are covered as often as the others. Every span draws one fate
(``[MASK]``, a random token, or kept: 80/10/10) that all its words share. (Drawing spans
independently at every word, as a vectorised Bernoulli, keeps the rate too, but overlapping spans
cut each other short: MacBERT's 4-grams showed 7 % of the time, not 10 %.)

The spans are returned as the one uniform number per token that
:func:`~bert_mlm.core.model.masking.mask_tokens` decides selection and fate by (``u < p`` selects,
``u / p`` is the fate), so the rest of masking (specials never selected, labels, random ids) is
the same for every scheme. All draws come from the batch's generator: masks stay a pure function of
(seed, epoch, batch, rank).
"""

from __future__ import annotations

import numpy as np
import torch

BURN_IN = 64  # words of the chain drawn before a row: the first words are then at the chain's stationary rate


def start_probability(probability: float, lengths: tuple[float, ...]) -> float:
    """The probability ``q`` that a segment is a span, for a covered share of ``probability``:
    ``q E[n] / (q E[n] + 1 - q) = probability``."""
    mean = float(np.dot(np.arange(1, len(lengths) + 1), lengths))
    return probability / (mean * (1 - probability) + probability)


def span_uniform(word_starts: torch.Tensor, probability: float, lengths: tuple[float, ...],
                 generator: torch.Generator) -> torch.Tensor:
    """One number in [0, 1) per token, below ``probability`` exactly for the tokens of covered
    words (every piece of a word alike), and there ``probability`` times its span's fate draw.
    ``word_starts``: true where a token begins a word (each row's first column true)."""
    rows, length = word_starts.shape
    segments = length + BURN_IN  # each segment holds at least one word: enough to pass the row's end
    is_span = torch.rand((rows, segments), generator=generator).numpy() < start_probability(probability, lengths)
    drawn = np.searchsorted(np.cumsum(lengths), torch.rand((rows, segments), generator=generator).numpy(),
                            side="right")
    words = np.where(is_span, np.minimum(drawn, len(lengths) - 1) + 1, 1)
    fate = torch.rand((rows, segments), generator=generator).numpy()
    # Segment ends (exclusive) in row coordinates, made one increasing array with a stride per row.
    stride = segments * len(lengths) + 1
    ends = (np.cumsum(words, axis=1) - BURN_IN + np.arange(rows)[:, None] * stride).reshape(-1)
    word_index = np.cumsum(word_starts.numpy(), axis=1) - 1  # each token's word in its row
    segment = np.searchsorted(ends, (word_index + np.arange(rows)[:, None] * stride).reshape(-1), side="right")
    uniform = np.where(is_span.reshape(-1)[segment], probability * fate.reshape(-1)[segment], 1.0)
    return torch.from_numpy(uniform.reshape(rows, length).astype(np.float32))
