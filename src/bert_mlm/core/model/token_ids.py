"""The token ids a training run needs, taken from the tokenizer: shared by the loop, the
experiment and the data stages, in a module below all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.model.masking import replacement_vocabulary
from bert_mlm.core.tokens.sequences import Collator
from bert_mlm.core.tokens.tokenizer import special_token_ids
from bert_mlm.core.tokens.words import continuation_ids


@dataclass
class TokenIds:
    """The token ids the loop needs, taken from the tokenizer."""

    pad: int
    mask: int
    special: Sequence[int]
    replacement: torch.Tensor
    continuation: Sequence[int] = ()  # WordPiece ``##`` pieces: they continue a word

    @classmethod
    def from_tokenizer(cls, tokenizer: PreTrainedTokenizerBase) -> TokenIds:
        special = special_token_ids(tokenizer)
        return cls(tokenizer.pad_token_id, tokenizer.mask_token_id, special, replacement_vocabulary(len(tokenizer),
                   special), continuation_ids(tokenizer.get_vocab()).tolist())

    def collator(self, max_length: int, padding: str = "dynamic", whole_word: bool = False) -> Collator:
        return Collator(self.pad, self.special, max_length, padding, whole_word, self.continuation)
