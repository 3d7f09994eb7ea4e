"""Span masking's statistics over a million tokens: the masked share, the span lengths, the rate at
a row's first words, and determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_mlm.config import MaskingConfig
from bert_mlm.core.model.spans import span_uniform, start_probability

NGRAM_PROBABILITIES = MaskingConfig(span="ngram").span_lengths  # MacBERT's, by default


def geometric_lengths() -> tuple[float, ...]:
    return MaskingConfig(span="geometric").span_lengths  # SpanBERT's, by default


ROWS, COLUMNS = 8192, 128  # 1,048,576 tokens


def word_starts(seed: int, share: float = 0.6) -> torch.Tensor:
    """Words of one to several pieces (a piece starts a word with probability ``share``)."""
    starts = torch.rand((ROWS, COLUMNS), generator=torch.Generator().manual_seed(seed)) < share
    starts[:, 0] = True
    return starts


def visible_spans(uniform: np.ndarray, starts: np.ndarray, probability: float) -> dict[int, int]:
    """Lengths in words of the runs of covered words that share one fate draw (one span each),
    leaving out a row's last run (cut by the row's end)."""
    counts: dict[int, int] = {}
    for row in range(uniform.shape[0]):
        values = uniform[row][starts[row]]
        change = np.flatnonzero(np.diff(values) != 0) + 1
        runs = np.split(values, change)[:-1]
        for run in runs:
            if run[0] < probability:
                counts[len(run)] = counts.get(len(run), 0) + 1
    return counts


@pytest.mark.parametrize(("scheme", "lengths"), [("ngram", NGRAM_PROBABILITIES), ("geometric", geometric_lengths())])
@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_words_are_covered_at_the_rate_and_spans_keep_their_lengths(scheme, lengths, probability):
    starts = word_starts(1)
    uniform = span_uniform(starts, probability, lengths, torch.Generator().manual_seed(2)).numpy()
    covered = uniform < probability
    # Spans are correlated runs: their standard error is that of ~ tokens / (mean span tokens) draws.
    mean_words = float(np.dot(np.arange(1, len(lengths) + 1), lengths))
    error = np.sqrt(probability * (1 - probability) / (covered.size / (mean_words / 0.6)))
    assert covered.mean() == pytest.approx(probability, abs=4 * error)
    assert covered[:, 0].mean() == pytest.approx(probability, abs=0.02)  # the first words as often as the rest
    # Every piece of a word shares its word's draw.
    word_of = np.cumsum(starts.numpy(), axis=1) - 1
    first_piece = np.take_along_axis(uniform, np.maximum.accumulate(
        np.where(starts.numpy(), np.arange(COLUMNS), 0), axis=1), axis=1)
    assert np.array_equal(uniform, first_piece) and word_of.max() < COLUMNS
    # The fate of a covered word is uniform: 80/10/10 once mask_tokens divides by the probability.
    fates = uniform[covered] / probability
    assert np.mean(fates < 0.8) == pytest.approx(0.8, abs=0.01) and np.mean(fates >= 0.9) == pytest.approx(0.1,
                                                                                                             abs=0.01)
    shown = visible_spans(uniform[:2000], starts.numpy()[:2000], probability)
    total = sum(shown.values())
    observed = np.array([shown.get(n, 0) / total for n in range(1, len(lengths) + 1)])
    assert set(shown) <= set(range(1, len(lengths) + 1))
    assert np.abs(observed - np.array(lengths)).max() < 0.02  # spans never overlap: each shows its drawn length


def test_the_start_probability_gives_the_rate():
    for lengths in (NGRAM_PROBABILITIES, geometric_lengths(), (1.0,)):
        q = start_probability(0.15, lengths)
        mean = float(np.dot(np.arange(1, len(lengths) + 1), lengths))
        assert q * mean / (q * mean + 1 - q) == pytest.approx(0.15)
    assert start_probability(0.15, (1.0,)) == pytest.approx(0.15)  # one-word spans: token-level selection
    assert geometric_lengths()[0] == pytest.approx(0.2 / (1 - 0.8 ** 10))


def test_the_same_generator_state_draws_the_same_spans():
    starts = word_starts(3)[:64]
    first = span_uniform(starts, 0.15, NGRAM_PROBABILITIES, torch.Generator().manual_seed(9))
    again = span_uniform(starts, 0.15, NGRAM_PROBABILITIES, torch.Generator().manual_seed(9))
    other = span_uniform(starts, 0.15, NGRAM_PROBABILITIES, torch.Generator().manual_seed(10))
    assert torch.equal(first, again) and not torch.equal(first, other)
