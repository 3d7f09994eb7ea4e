"""Mixtures at sample time: each epoch draws every source by its weight (or repeat), exact to a
sequence, from (seed, epoch) alone; the stored data holds each source once."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from bert_mlm.config import TrainingConfig
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.tokens.blend import SourceSpan, plan_mixture
from bert_mlm.core.train.loop import epoch_batches
from bert_mlm.errors import UserError

SPANS = [SourceSpan("tickets", 0, 137), SourceSpan("general", 137, 2137)]


def _plan(sources):
    return plan_mixture(SPANS, source_settings(sources))


# (1, 0): a study's replay_share of 0 keeps the stored source out of the epoch
@pytest.mark.parametrize(("weights"), [(0.7, 0.3), (0.5, 0.5), (0.01, 0.99), (3, 1), (1, 0)])
def test_each_source_gets_its_weight_of_the_epoch_within_one_sequence(weights):
    plan = _plan({"tickets": {"path": "a", "weight": weights[0]}, "general": {"path": "b", "weight": weights[1]}})
    assert plan.epoch_size == 2137  # the stored size: a weight moves shares, not the epoch's length
    sample = plan.sample(seed=3, epoch=0)
    assert len(sample) == plan.epoch_size
    drawn = np.bincount(np.searchsorted([137], sample, side="right"), minlength=2)
    for count, weight in zip(drawn, weights, strict=True):
        assert abs(count - weight / sum(weights) * plan.epoch_size) < 1
    shares = plan.shares(sample, np.full(2137, 128))
    assert shares["tickets"]["epoch_sequences"] == drawn[0]
    assert shares["tickets"]["share_of_sequences"] == pytest.approx(weights[0] / sum(weights), abs=1 / 2137)


def test_an_epoch_is_a_function_of_seed_and_epoch_and_thinned_sources_vary_between_epochs():
    plan = _plan({"tickets": {"path": "a", "weight": 0.7}, "general": {"path": "b", "weight": 0.3}})
    first = plan.sample(seed=0, epoch=0)
    assert np.array_equal(first, plan.sample(seed=0, epoch=0))
    assert not np.array_equal(first, plan.sample(seed=0, epoch=1))
    assert not np.array_equal(first, plan.sample(seed=1, epoch=0))
    # tickets (137 stored, ~1496 drawn): every sequence 10 times, and 126 more without repeats
    tickets = np.bincount(first[first < 137], minlength=137)
    assert set(tickets.tolist()) <= {10, 11} and (tickets == 11).sum() == plan.counts[0] - 10 * 137
    # general (2000 stored, 641 drawn): no sequence twice, another subset next epoch
    general = first[first >= 137]
    assert len(np.unique(general)) == len(general) == plan.counts[1]
    later = plan.sample(seed=0, epoch=1)
    assert len(np.intersect1d(general, later[later >= 137])) < len(general)


def test_repeat_draws_that_many_passes_over_a_source():
    plan = _plan({"tickets": {"path": "a", "repeat": 2.5}, "general": {"path": "b"}})
    assert plan.counts == (342, 2000)  # round(2.5 x 137), and one pass (repeat 1 by default)
    assert len(plan.sample(0, 0)) == 2342


def test_the_epochs_batches_hold_the_drawn_sequences_and_resume_identically():
    plan = _plan({"tickets": {"path": "a", "weight": 0.7}, "general": {"path": "b", "weight": 0.3}})
    lengths = np.random.default_rng(0).integers(20, 128, 2137)
    config = TrainingConfig(batch_size=32, seed=5)
    batches = epoch_batches(lengths, config, 2, mixture=plan)
    drawn = np.sort(np.concatenate([batches[k] for k in range(len(batches))]))
    assert np.array_equal(drawn, np.sort(plan.sample(5, 2)))
    again = epoch_batches(lengths, config, 2, mixture=plan)  # a resumed run redraws epoch 2 from (seed, epoch)
    assert all(np.array_equal(batches[k], again[k]) for k in range(len(batches)))


def test_a_huge_epoch_is_said_out_loud(caplog):
    with caplog.at_level(logging.INFO, logger="bert_mlm.core.tokens.blend"):
        plan = _plan({"tickets": {"path": "a", "repeat": 100000}, "general": {"path": "b"}})
    assert plan.epoch_size == 13_702_000
    assert "Mixture: an epoch draws 13,702,000 sequences: tickets 13,700,000" in caplog.text
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING).getMessage()
    assert "6412x the 2,137 stored (tickets repeat=100000, general repeat=1)" in warning


@pytest.mark.parametrize(("sources", "message"), [
    ({"tickets": {"weight": 0.5}}, r"names \['tickets'\], but the token store holds the sources \['tickets', "
                                   r"'general'\]"),
    ({"tickets": {"weight": 0.5}, "general": {}}, "give every source a weight, or none"),
    ({"tickets": {"weight": -1}, "general": {"weight": 1}},
     r"corpus\.sources\.tickets\.weight: -1 must be a non-negative"),
    ({"tickets": {"weight": 1, "repeat": 2}, "general": {}}, "weight or repeat, not both"),
])
def test_bad_mixture_settings_are_one_line_naming_the_key(sources, message):
    with pytest.raises(UserError, match=message):
        _plan(sources)


def test_without_settings_every_stored_source_is_drawn_once():
    plan = plan_mixture(SPANS, None)
    assert plan.counts == (137, 2000)
