"""Dynamic masking: BERT's 80/10/10 statistics, special tokens, determinism, validation."""

from __future__ import annotations

import pytest
import torch

from bert_mlm.config import MaskingConfig
from bert_mlm.core.common.seeds import stream_seed
from bert_mlm.core.model.masking import (
    IGNORE_INDEX,
    mask_generator,
    mask_tokens,
    replacement_vocabulary,
)

VOCAB = 8000
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = [PAD, UNK, CLS, SEP, MASK]
ROWS, COLS = 8192, 128  # 1,048,576 positions


@pytest.fixture(scope="module")
def batch():
    """Random ids (never special) with [CLS] at column 0, [SEP] at the end, random pad tails."""
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(5, VOCAB, (ROWS, COLS), generator=g)
    lengths = torch.randint(16, COLS + 1, (ROWS,), generator=g)
    positions = torch.arange(COLS)[None, :]
    attention = positions < lengths[:, None]
    ids[:, 0] = CLS
    ids[torch.arange(ROWS), lengths - 1] = SEP
    ids[~attention] = PAD
    # A sprinkling of [UNK] inside the text: special, never selected.
    unk = (torch.rand((ROWS, COLS), generator=g) < 0.01) & attention
    unk[:, 0] = False
    ids[unk] = UNK
    special = torch.isin(ids, torch.tensor(SPECIALS)) | ~attention
    return ids, special.long(), attention


@pytest.fixture(scope="module")
def small_batch(batch):
    """The first 512 rows: enough for determinism checks, cheaper than the statistics batch."""
    return tuple(t[:512] for t in batch)


@pytest.fixture(scope="module")
def replacement():
    return replacement_vocabulary(VOCAB, SPECIALS)


def _mask(batch, replacement, config, seed=0, epoch=0, index=0, rank=0):
    ids, special, _ = batch
    return mask_tokens(ids, special, MASK, replacement, config, mask_generator(seed, epoch, index, rank))


def test_replacement_vocabulary_excludes_special_ids(replacement):
    assert len(replacement) == VOCAB - len(SPECIALS)
    assert replacement.tolist() == list(range(5, VOCAB))
    odd = replacement_vocabulary(10, [0, 3, 7])
    assert odd.tolist() == [1, 2, 4, 5, 6, 8, 9]


@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_masking_statistics(batch, replacement, probability):
    ids, special, attention = batch
    assert ids.numel() >= 1_000_000
    before = ids.clone()
    masked, labels = _mask(batch, replacement, MaskingConfig(probability=probability))
    assert torch.equal(ids, before)  # the input tensor is not modified

    selected = labels != IGNORE_INDEX
    maskable = special == 0
    assert not (selected & ~maskable).any()  # no special token, no padding
    assert not selected[~attention.bool()].any()
    rate = selected.sum().item() / maskable.sum().item()
    assert abs(rate - probability) < 0.005

    # Labels: the original id where selected, -100 elsewhere.
    assert torch.equal(labels[selected], ids[selected])
    assert (labels[~selected] == IGNORE_INDEX).all()
    # Nothing changes outside the selected positions.
    assert torch.equal(masked[~selected], ids[~selected])

    n = selected.sum().item()
    orig, new = ids[selected], masked[selected]
    is_mask = new == MASK
    is_random = (new != orig) & ~is_mask
    is_kept = new == orig
    # A random draw equals the original with probability 1/len(replacement); that only moves
    # ~0.1 / 7995 of the selected tokens from "random" to "kept".
    collide = 1 / len(replacement)
    assert abs(is_mask.sum().item() / n - 0.8) < 0.01
    assert abs(is_random.sum().item() / n - 0.1 * (1 - collide)) < 0.01
    assert abs(is_kept.sum().item() / n - (0.1 + 0.1 * collide)) < 0.01
    assert (is_mask | is_random | is_kept).all()

    # Random replacements are never special ids.
    assert not torch.isin(new[is_random], torch.tensor(SPECIALS)).any()
    assert (new[is_random] >= 5).all() and (new[is_random] < VOCAB).all()
    # ... and cover the replacement vocabulary uniformly: distinct ids close to the expectation
    # for uniform draws, V * (1 - (1 - 1/V) ** draws).
    draws, v = is_random.sum().item(), len(replacement)
    expected_distinct = v * (1 - (1 - 1 / v) ** draws)
    assert torch.unique(new[is_random]).numel() > 0.95 * expected_distinct
    assert masked.dtype == ids.dtype and masked.shape == ids.shape


def test_only_mask_or_only_keep(small_batch, replacement):
    ids, _, _ = small_batch
    masked, labels = _mask(small_batch, replacement, MaskingConfig(0.2, 1.0, 0.0))
    selected = labels != IGNORE_INDEX
    assert (masked[selected] == MASK).all()
    assert torch.equal(masked[~selected], ids[~selected])
    masked, labels = _mask(small_batch, replacement, MaskingConfig(0.2, 0.0, 0.0))
    assert torch.equal(masked, ids)
    assert (labels != IGNORE_INDEX).any()


def test_same_seed_epoch_batch_repeats_exactly(small_batch, replacement):
    config = MaskingConfig()
    a = _mask(small_batch, replacement, config, seed=5, epoch=2, index=7)
    torch.manual_seed(999)  # the global RNG plays no part
    torch.rand(10)
    b = _mask(small_batch, replacement, config, seed=5, epoch=2, index=7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize(
    "other",
    [
        {"epoch": 3},
        {"rank": 1},
        {"index": 8},
        {"seed": 6},
    ],
    ids=["epoch", "rank", "batch", "seed"],
)
def test_different_epoch_rank_batch_or_seed_differ(small_batch, replacement, other):
    config = MaskingConfig()
    base = {"seed": 5, "epoch": 2, "index": 7, "rank": 0}
    a_masked, a_labels = _mask(small_batch, replacement, config, **base)
    b_masked, b_labels = _mask(small_batch, replacement, config, **{**base, **other})
    a_sel, b_sel = a_labels != IGNORE_INDEX, b_labels != IGNORE_INDEX
    assert not torch.equal(a_sel, b_sel)
    # Independent draws: the overlap of selections is about p * p of the maskable tokens.
    overlap = (a_sel & b_sel).sum().item() / a_sel.sum().item()
    assert overlap < 0.2


def test_stream_seed_properties():
    seeds = {stream_seed(1, epoch, index, rank) for epoch in range(5) for index in range(20) for rank in range(4)}
    assert len(seeds) == 5 * 20 * 4
    assert all(0 <= s < 2**63 for s in seeds)
    assert stream_seed(1, 2, 3, 0) == stream_seed(1, 2, 3, 0)
    assert stream_seed(1, 2, 3, 0, stream=0) != stream_seed(1, 2, 3, 0, stream=1)


@pytest.mark.parametrize(
    ("args", "parameter"),
    [
        ((0.0, 0.8, 0.1), "masking.probability"),
        ((-0.1, 0.8, 0.1), "masking.probability"),
        ((1.0, 0.8, 0.1), "masking.probability"),
        ((1.5, 0.8, 0.1), "masking.probability"),
        ((0.15, 0.8, 0.3), "masking.mask_token_fraction + masking.random_token_fraction"),
        ((0.15, -0.1, 0.1), "masking.mask_token_fraction"),
        ((0.15, 0.8, -0.1), "masking.random_token_fraction"),
        ((0.15, 1.2, 0.0), "masking.mask_token_fraction"),
    ],
)
def test_masking_config_rejects_bad_values(args, parameter):
    with pytest.raises(ValueError) as info:
        MaskingConfig(*args)
    assert parameter in str(info.value)


def test_valid_edges():
    MaskingConfig(0.5, 1.0, 0.0)
    MaskingConfig(0.01, 0.0, 1.0)
    MaskingConfig(0.15, 0.7, 0.3)


def _words(ids, special, seed=7, continue_share=0.4):
    """Word starts for a batch: about ``continue_share`` of the tokens continue the word before."""
    g = torch.Generator().manual_seed(seed)
    starts = (torch.rand(ids.shape, generator=g) >= continue_share) | (special == 1)
    starts[:, 1:] |= special[:, :-1] == 1
    starts[:, 0] = True
    return starts


@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_whole_word_selection_keeps_the_share_and_moves_words_together(batch, replacement, probability):
    ids, special, _ = batch
    starts = _words(ids, special)
    config = MaskingConfig(probability, whole_word=True)
    masked, labels = mask_tokens(ids, special, MASK, replacement, config, mask_generator(0, 0, 0), starts)
    selected = labels != IGNORE_INDEX
    maskable = special == 0
    assert not (selected & ~maskable).any()
    assert abs(selected.sum().item() / maskable.sum().item() - probability) < 0.01
    continuing = ~starts & maskable
    assert continuing.sum() > 0.3 * maskable.sum()
    assert torch.equal(selected[continuing], torch.roll(selected, 1, 1)[continuing])  # all pieces or none
    # One fate per word: a continuing piece is [MASK] exactly when its word's previous piece is.
    is_mask = masked == MASK
    both = continuing & selected
    assert torch.equal(is_mask[both], torch.roll(is_mask, 1, 1)[both])
    kept = masked == ids
    assert (kept[both] == torch.roll(kept, 1, 1)[both]).float().mean() > 0.999  # random == original, rarely
    n = selected.sum().item()
    assert abs(is_mask[selected].sum().item() / n - 0.8) < 0.01


def test_whole_word_without_multi_piece_words_is_token_level(small_batch, replacement):
    ids, special, _ = small_batch
    every_token_a_word = torch.ones(ids.shape, dtype=torch.bool)
    token = _mask(small_batch, replacement, MaskingConfig(0.3))
    whole = mask_tokens(ids, special, MASK, replacement, MaskingConfig(0.3, whole_word=True),
                        mask_generator(0, 0, 0), every_token_a_word)
    assert torch.equal(token[0], whole[0]) and torch.equal(token[1], whole[1])


def test_whole_word_masks_are_a_function_of_seed_epoch_batch(small_batch, replacement):
    ids, special, _ = small_batch
    starts = _words(ids, special)
    config = MaskingConfig(whole_word=True)
    first = mask_tokens(ids, special, MASK, replacement, config, mask_generator(3, 1, 2), starts)
    again = mask_tokens(ids, special, MASK, replacement, config, mask_generator(3, 1, 2), starts)
    other = mask_tokens(ids, special, MASK, replacement, config, mask_generator(3, 2, 2), starts)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[1], other[1])


@pytest.mark.parametrize(("field", "value", "message"), [
    ("whole_word", "yes", r"masking\.whole_word: 'yes' must be true or false"),
    ("word_segmenter", "spaces", r"masking\.word_segmenter: 'spaces' is not one of"),
])
def test_whole_word_parameters_are_validated(field, value, message):
    with pytest.raises(ValueError, match=message):
        MaskingConfig(**{field: value})


@pytest.mark.parametrize("span", ["ngram", "geometric"])
def test_span_masking_keeps_the_rate_the_80_10_10_and_never_masks_specials(batch, replacement, span):
    """Whole-word n-grams and geometric spans over a million tokens: the masked share of the
    non-special tokens is the probability, each span's fate is 80/10/10 and specials never move."""
    ids, special, _ = batch
    starts = torch.rand(ids.shape, generator=torch.Generator().manual_seed(5)) < 0.7
    starts[:, 0] = True
    config = MaskingConfig(span=span)
    masked, labels = mask_tokens(ids, special, MASK, replacement, config, mask_generator(0, 0, 0), starts)
    selected = labels != IGNORE_INDEX
    maskable = special == 0
    assert not (selected & ~maskable).any() and torch.equal(masked[~maskable], ids[~maskable])
    share = selected.sum().item() / maskable.sum().item()
    assert share == pytest.approx(0.15, abs=0.004)  # spans are correlated: a few times the token-level error
    fates = masked[selected]
    assert (fates == MASK).float().mean().item() == pytest.approx(0.8, abs=0.01)
    kept = (fates == ids[selected]).float().mean().item()
    assert kept == pytest.approx(0.1 + 0.1 / len(replacement), abs=0.01)  # kept, or replaced by itself
    # Every piece of a word shares one fate; the same (seed, epoch, batch, rank) draws the same spans.
    again, _ = mask_tokens(ids, special, MASK, replacement, config, mask_generator(0, 0, 0), starts)
    assert torch.equal(masked, again)


def test_span_settings_are_checked():
    with pytest.raises(ValueError, match=r"masking\.ngram_probabilities: \[0\.5, 0\.4\] must sum to 1"):
        MaskingConfig(span="ngram", ngram_probabilities=[0.5, 0.4])
    assert MaskingConfig(span="ngram").words and not MaskingConfig().words
    assert MaskingConfig(span="geometric").span_lengths[0] == pytest.approx(0.2 / (1 - 0.8 ** 10))
