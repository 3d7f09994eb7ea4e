"""Intervals: the paired gain of a ratio of sums (entity F1) covers the true difference about 95 %
of the time when both the seeds and the eval sentences vary, and is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bert_mlm.core.common.statistics import Estimate, combined_interval, ratio_interval, ratios

GOLD_PER_SENTENCE = 1.5  # entities per sentence (Poisson)
SPURIOUS_TRIES = 2  # chances per sentence of a false entity


def population_f1(hit_rate: np.ndarray, false_rate: float) -> np.ndarray:
    """A tagger's entity F1 on infinitely many sentences: it finds each gold entity with
    probability ``hit_rate`` and adds a false one with probability ``false_rate`` per try."""
    found = hit_rate * GOLD_PER_SENTENCE
    return 2 * found / (found + SPURIOUS_TRIES * false_rate + GOLD_PER_SENTENCE)


def true_gain(a: tuple[float, float], b: tuple[float, float], seed_sd: float) -> float:
    """The expected F1 difference over the seeds' effect (a normal shift of the hit rate), by
    Gauss-Hermite quadrature: the value the interval is for."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    return float(weights @ population_f1(a[0] + seed_sd * nodes, a[1]) - weights @ population_f1(b[0] + seed_sd * nodes,
                                                                                                   b[1]))


def simulate(rng: np.random.Generator, sentences: int, seeds: int, taggers, seed_sd: float):
    """Two synthetic taggers on the same sentences with the same seeds: (numerator, denominator)
    of each one's entity F1 per (seed, sentence). A gold entity is found when its difficulty is
    below the tagger's hit rate for that seed (so both find the easy ones: they are paired)."""
    gold = rng.poisson(GOLD_PER_SENTENCE, sentences)
    difficulty, sentence = rng.random(gold.sum()), np.repeat(np.arange(sentences), gold)
    parts = []
    for hit_rate, false_rate in taggers:
        rates = hit_rate + seed_sd * rng.standard_normal(seeds)
        found = np.stack([np.bincount(sentence, weights=difficulty < rate, minlength=sentences) for rate in rates])
        false = rng.binomial(SPURIOUS_TRIES, false_rate, (seeds, sentences))
        parts.append((2 * found, found + false + gold[None, :]))
    return parts


def coverage(sentences: int, seeds: int, seed_sd: float, repetitions: int = 250) -> dict[str, float]:
    """How often the 95 % interval covers the true gain, and how often an interval with only one
    of its two sources of error would."""
    taggers = ((0.8, 0.2), (0.75, 0.2))
    truth = true_gain(*taggers, seed_sd)
    rng, covered = np.random.default_rng(7), {"both": 0, "seeds only": 0, "sentences only": 0}
    for repetition in range(repetitions):
        (numerator, denominator), baseline = simulate(rng, sentences, seeds, taggers, seed_sd)
        both = ratio_interval(numerator, denominator, baseline, resamples=300, seed=repetition)
        per_seed = ratios(numerator.sum(1), denominator.sum(1)) - ratios(baseline[0].sum(1), baseline[1].sum(1))
        seeds_only = combined_interval(per_seed.mean(), [(per_seed.var(ddof=1) / seeds, seeds - 1)])
        bootstrap_variance = both.se**2 - per_seed.var(ddof=1) / seeds
        sentences_only = combined_interval(per_seed.mean(), [(bootstrap_variance, sentences - 1)])
        for name, interval in (("both", both), ("seeds only", seeds_only), ("sentences only", sentences_only)):
            covered[name] += interval.low <= truth <= interval.high
    return {name: count / repetitions for name, count in covered.items()}


@pytest.mark.parametrize("sentences, seeds, seed_sd, one_source", [
    (400, 4, 0.02, "sentences only"),  # the seeds' spread dominates
    (200, 10, 0.008, "seeds only"),  # the sentences' sampling dominates
])
def test_the_paired_interval_covers_the_true_gain(sentences, seeds, seed_sd, one_source):
    result = coverage(sentences, seeds, seed_sd)
    # 250 repetitions: a binomial standard error of 1.4 points around 95 %.
    assert 0.91 <= result["both"] <= 0.99, result
    assert result[one_source] < 0.88, f"the test could not tell a half interval: {result}"


def test_the_interval_is_deterministic_and_its_seed_only_moves_the_bootstrap():
    (numerator, denominator), baseline = simulate(np.random.default_rng(1), 300, 3, ((0.8, 0.2), (0.7, 0.3)), 0.02)
    first, again = (ratio_interval(numerator, denominator, baseline, seed=5) for _ in range(2))
    other = ratio_interval(numerator, denominator, baseline, seed=6)
    assert first == again and first.mean == other.mean and first.se != other.se
    assert first.se == pytest.approx(other.se, rel=0.1)
    per_seed = ratios(numerator.sum(1), denominator.sum(1)) - ratios(baseline[0].sum(1), baseline[1].sum(1))
    assert first.mean == pytest.approx(per_seed.mean()) and first.low < first.mean < first.high


def test_a_mean_of_one_seed_gets_the_standard_error_of_a_mean():
    """Denominators of 1 make the ratio a plain mean: the bootstrap's standard error is then
    the textbook one, sd / sqrt(n) (Chinese and English sentences alike are just units here)."""
    values = np.random.default_rng(2).binomial(1, 0.3, 2000).astype(float)
    interval = ratio_interval(values[None, :], np.ones((1, 2000)), resamples=4000, seed=0)
    assert interval.mean == pytest.approx(values.mean())
    assert interval.se == pytest.approx(values.std(ddof=1) / np.sqrt(2000), rel=0.05)


def test_combined_interval_is_a_t_interval_for_one_source_and_ignores_a_source_without_freedom():
    interval = combined_interval(1.0, [(0.04, 4), (0.5, 0)])
    half = stats.t.ppf(0.975, 4) * 0.2
    assert interval.se == pytest.approx(0.2) and interval.low == pytest.approx(1 - half)
    assert interval.high == pytest.approx(1 + half)
    assert combined_interval(2.0, []) == Estimate(2.0, 0.0, 2.0, 2.0)


def test_arrays_of_different_shapes_are_refused():
    with pytest.raises(ValueError, match="all must be"):
        ratio_interval(np.ones((2, 5)), np.ones((2, 5)), (np.ones((2, 4)), np.ones((2, 4))))
