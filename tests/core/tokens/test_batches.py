"""An epoch's batch order (shuffling, length bucketing, views of one order) and padding efficiency."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_mlm.core.tokens.batches import batch_order, padding_efficiency
from bert_mlm.core.tokens.sequences import Collator
from tests.core.tokens.test_sequences import PAD, SPECIALS, _sequences


def _varied_lengths(n=3000, seed=0):
    return np.random.default_rng(seed).integers(8, 129, size=n).tolist()


@pytest.mark.parametrize("bucketed", [False, True])
@pytest.mark.parametrize("shuffled", [False, True])
def test_batch_order_covers_every_index_once(bucketed, shuffled):
    lengths = _varied_lengths(1003)
    generator = torch.Generator().manual_seed(0) if shuffled else None
    batches = batch_order(lengths, 32, generator, bucketed=bucketed, bucket_batches=5)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(1003))
    assert all(1 <= len(b) <= 32 for b in batches)
    assert sum(len(b) == 32 for b in batches) == 1003 // 32
    if not shuffled and not bucketed:
        assert flat == list(range(1003))


def test_batch_order_deterministic_per_generator_seed():
    lengths = _varied_lengths(500)
    one = batch_order(lengths, 16, torch.Generator().manual_seed(3), bucketed=True)
    two = batch_order(lengths, 16, torch.Generator().manual_seed(3), bucketed=True)
    other = batch_order(lengths, 16, torch.Generator().manual_seed(4), bucketed=True)
    assert one.tolist() == two.tolist()
    assert one.tolist() != other.tolist()


def test_bucketing_improves_padding_efficiency():
    lengths = _varied_lengths()
    collator = Collator(PAD, SPECIALS, 128, padding="dynamic")
    plain = batch_order(lengths, 32, torch.Generator().manual_seed(0), bucketed=False)
    bucketed = batch_order(lengths, 32, torch.Generator().manual_seed(0), bucketed=True)
    plain_eff = padding_efficiency(lengths, plain, collator)
    bucketed_eff = padding_efficiency(lengths, bucketed, collator)
    assert bucketed_eff > plain_eff + 0.2
    assert 0 < plain_eff < bucketed_eff <= 1
    static = Collator(PAD, SPECIALS, 128, padding="static")
    assert padding_efficiency(lengths, bucketed, static) == pytest.approx(sum(lengths) / (128 * len(lengths)))


def test_padding_efficiency_matches_collated_batches():
    sequences = _sequences()
    lengths = [len(s) for s in sequences]
    collator = Collator(PAD, SPECIALS, 128, padding="dynamic")
    batches = batch_order(lengths, 8, torch.Generator().manual_seed(1), bucketed=True, bucket_batches=3)
    real = total = 0
    for indices in batches:
        batch = collator([sequences[i] for i in indices])
        real += int(batch["attention_mask"].sum())
        total += batch["attention_mask"].numel()
    assert padding_efficiency(lengths, batches, collator) == pytest.approx(real / total)


def test_batches_are_views_of_one_order():
    lengths = _varied_lengths(1000)
    batches = batch_order(lengths, 32, torch.Generator().manual_seed(0), bucketed=True)
    assert len(batches) == 32 and len(batches[::2]) == 16
    assert batches[::2][1].tolist() == batches[2].tolist()
    assert batches[3].base is not None  # a view, not a copy
