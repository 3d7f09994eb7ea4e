"""Where a from-scratch model starts: ``model.initialisation``.

``bert``: BERT's own, every weight drawn from normal(0, ``model.initializer_range``). Its heads start by
attending almost evenly to the whole sequence, so no token's neighbours reach it, and a small model
spends most of a short budget on the unigram plateau (every mask filled with the most frequent tokens)
before its heads learn to look at them: 3,000 steps of the default 2 x 128 model on Chinese news still
did not leave it.

``local``: the same draw, then the neighbours made visible from the first step (the model stays a plain,
fully trainable ``BertForMaskedLM``):

- the position embeddings are a Fourier code, position ``i`` the pairs ``(sin w i, cos w i)`` for
  frequencies ``w`` spread evenly over (0, pi], at the scale of ``model.initializer_range``: distinct
  positions are nearly orthogonal, and a shift by one position rotates each pair by its ``w``;
- the first layer's queries are its keys rotated by one position, so that its even heads attend to the
  next token and its odd heads to the previous one;
- its values and output projection multiply to minus the identity (the mimetic initialisation of
  Trockman & Kolter 2023): each position starts from its own state less its neighbours'. With the
  identity instead, the heads turned away from their neighbours within 100 steps.

Measured in BENCHMARKS.md ("Time to quality").
"""

from __future__ import annotations

import math

import torch
from transformers import BertForMaskedLM

# The rotated queries' scale on the keys: at the start, ~35 % of each head's attention rests on its
# neighbour (with 2 heads of 64; 2 and 4 trained alike, BENCHMARKS.md).
LOCAL_ATTENTION_GAIN = 2.0


@torch.no_grad()
def initialise_locally(model: BertForMaskedLM) -> None:
    """``model``'s position embeddings and first layer's attention as ``local`` says (module docstring);
    its head width must be even (``ModelConfig`` checks)."""
    config = model.config
    width, heads = config.hidden_size, config.num_attention_heads
    pairs, head_width = width // 2, width // heads
    frequencies = math.pi * torch.arange(1, pairs + 1, dtype=torch.float64) / pairs
    angles = torch.arange(config.max_position_embeddings, dtype=torch.float64)[:, None] * frequencies
    code = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (sin, cos) of each frequency side by side
    model.bert.embeddings.position_embeddings.weight.copy_(code * (config.initializer_range / code.std()))
    query, key = torch.zeros(width, width, dtype=torch.float64), torch.zeros(width, width, dtype=torch.float64)
    gain = math.sqrt(LOCAL_ATTENTION_GAIN)
    for head in range(heads):  # each head holds every heads-th frequency pair, low to high
        shift = 1 if head % 2 == 0 else -1
        for slot, pair in enumerate(range(head, pairs, heads)):
            row, column = head * head_width + 2 * slot, 2 * pair
            cos, sin = math.cos(shift * frequencies[pair]), math.sin(shift * frequencies[pair])
            key[row:row + 2, column:column + 2] = gain * torch.eye(2, dtype=torch.float64)
            # (sin w(i+s), cos w(i+s)) from (sin wi, cos wi): q_i . k_j = gain x sum of cos w(i + s - j), largest at
            # j = i + s
            query[row:row + 2, column:column + 2] = gain * torch.tensor([[cos, sin], [-sin, cos]], dtype=torch.float64)
    first = model.bert.encoder.layer[0].attention
    first.self.query.weight.copy_(query)
    first.self.key.weight.copy_(key)
    first.self.value.weight.copy_(torch.eye(width))
    first.output.dense.weight.copy_(-torch.eye(width))
