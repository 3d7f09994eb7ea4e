"""Dynamic masking for masked language modelling.

Semantics (BERT, Devlin et al. 2019): each maskable token is selected with probability
``probability``. Of the selected tokens, ``mask_token_fraction`` become ``[MASK]``,
``random_token_fraction`` become a token drawn uniformly from the non-special vocabulary, and the
rest keep their id. Labels hold the original id at selected positions and ``-100`` (ignored by
the loss) everywhere else. Special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ...) and padding are
never selected.

With ``whole_word``, selection is per word instead of per token: every piece of a selected word
is predicted, and all of them share one fate (all ``[MASK]``, all random, or all kept). The share
of selected tokens stays ``probability`` in expectation, because each token is selected exactly
when its word is. Word starts come from :mod:`bert_mlm.core.tokens.words`.

Masks are a pure function of (seed, epoch, rank, batch index): :func:`mask_generator` seeds a
fresh ``torch.Generator`` per batch (as fairseq's ``MaskTokensDataset`` does per item), so an
epoch's masks are the same when it is rerun or resumed mid-epoch, and differ between epochs and
between data-parallel ranks.
"""

from __future__ import annotations

import numpy as np
import torch

from bert_mlm.config import MaskingConfig
from bert_mlm.core.common.seeds import stream_seed
from bert_mlm.core.model.spans import span_uniform

IGNORE_INDEX = -100


# Bumped whenever the same seed would draw different masks (2: one uniform draw per token), so
# that tuning studies and fixed-protocol results from another scheme are not mixed with these.
MASKING_SCHEME = 2


def mask_generator(seed: int, epoch: int, batch_index: int, rank: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(stream_seed(seed, epoch, batch_index, rank))


def mask_tokens(input_ids: torch.Tensor, special_tokens_mask: torch.Tensor, mask_token_id: int,
                replacement_ids: torch.Tensor, config: MaskingConfig, generator: torch.Generator,
                word_starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(masked_input_ids, labels)`` for one batch; the inputs are not modified.

    ``special_tokens_mask`` is 1 where a token must never be selected (special tokens and
    padding: the :class:`~bert_mlm.core.tokens.sequences.Collator` sets it so). ``replacement_ids``
    is the 1-D tensor of ids that random replacement draws from (the non-special vocabulary).
    All random draws come from ``generator`` on the CPU, so masks do not depend on the device.
    ``word_starts`` (whole-word and span masking) is true where a token begins a word; its first
    position must be true. Without it every token is its own word. With ``config.span``, words are
    selected in spans (:mod:`bert_mlm.core.model.spans`), each span's words sharing one fate.
    """
    # One uniform draw per token decides both whether it is selected (u < p) and, given that,
    # its fate: u / p is again uniform on [0, 1), so [0, m) -> [MASK], [m, m + r) -> a random
    # token, the rest kept. Random ids are drawn only for the tokens that need one. Half the
    # random numbers of three separate draws, and 2x faster than them.
    if config.span != "none":  # spans of whole words: the draws of core.model.spans, in the same form
        uniform = span_uniform(word_starts, config.probability, config.span_lengths, generator)
    else:
        uniform = torch.rand(input_ids.shape, generator=generator)
    if word_starts is not None and config.span == "none":
        # Every piece takes the draw of its word's first piece: one decision per word for both
        # selection and fate. The same draws as token-level masking, so a batch without
        # multi-piece words gets exactly the token-level masks.
        # (NumPy on the CPU tensors' memory, no copy: 3-5x faster than torch's cumsum + gathers
        # on a 32 x 128 batch, measured.)
        starts = word_starts.numpy().reshape(-1)
        first_piece = np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))
        uniform = torch.from_numpy(uniform.numpy().reshape(-1)[first_piece].reshape(input_ids.shape))
    selected = (uniform < config.probability) & (special_tokens_mask == 0)
    labels = torch.where(selected, input_ids, IGNORE_INDEX)
    mask_below = config.probability * config.mask_token_fraction
    random_below = config.probability * (config.mask_token_fraction + config.random_token_fraction)
    masked = torch.where(selected & (uniform < mask_below), mask_token_id, input_ids)
    to_random = selected & (uniform >= mask_below) & (uniform < random_below)
    random_index = torch.randint(len(replacement_ids), (int(to_random.sum()),), generator=generator)
    masked[to_random] = replacement_ids[random_index].to(masked.dtype)
    return masked, labels


def replacement_vocabulary(vocab_size: int, special_ids: list[int] | tuple[int, ...]) -> torch.Tensor:
    """Ids that random replacement may draw: the whole vocabulary except special tokens."""
    return torch.from_numpy(np.setdiff1d(np.arange(vocab_size, dtype=np.int64), special_ids))
