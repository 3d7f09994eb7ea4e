"""Words and their tags to WordPiece pieces and back, through the fast tokenizer's ``word_ids()``.

A word's first piece carries its tag and its other pieces are ignored, as Hugging Face's
``run_ner.py`` does (``label_all_pieces``: its ``--label_all_tokens``). Predictions come back to the
words through the first pieces; a word with no piece (cut off by ``max_length``, or dropped by the
tokenizer, such as a lone space) is predicted ``O``, so that every gold entity is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from transformers import PreTrainedTokenizerFast

IGNORED = -100  # the label id cross-entropy skips (torch's ignore_index, transformers' convention)


@dataclass(frozen=True)
class AlignmentReport:
    """What the words became: how many lost every piece to ``max_length`` (in how many
    sentences), how many the tokenizer turned into nothing, and how many are ``[UNK]`` alone."""

    words: int
    truncated: int
    truncated_sentences: int
    without_pieces: int
    unknown: int

    @property
    def unknown_rate(self) -> float:
        return self.unknown / self.words if self.words else 0.0

    def describe(self, split: str) -> str:
        return (f"{split}: {self.words:,} words; {self.truncated:,} cut off by finetune.max_length (in "
                f"{self.truncated_sentences:,} sentences) and {self.without_pieces:,} without any piece (predicted O); "
                f"{self.unknown:,} ({100 * self.unknown_rate:.1f} %) are [UNK] to the model's vocabulary")


@dataclass
class AlignedSentences:
    """Sentences as model inputs: piece ids and piece labels (``IGNORED`` where no tag is
    learnt), and per sentence the position of each word's first piece (-1: the word has none)."""

    input_ids: list[list[int]]
    labels: list[list[int]]
    first_pieces: list[np.ndarray]
    report: AlignmentReport

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self.input_ids))

    @property
    def word_counts(self) -> np.ndarray:
        return np.fromiter((len(p) for p in self.first_pieces), dtype=np.int64, count=len(self.first_pieces))

    def word_predictions(self, piece_predictions: Sequence[np.ndarray], outside_id: int) -> np.ndarray:
        """Each word's predicted label id (its first piece's; ``outside_id`` where it has no
        piece), flattened over the sentences in order."""
        words = []
        for first, predicted in zip(self.first_pieces, piece_predictions, strict=True):
            words.append(np.where(first >= 0, np.asarray(predicted)[np.maximum(first, 0)], outside_id))
        return np.concatenate(words) if words else np.zeros(0, dtype=np.int64)


def align(tokens: Sequence[Sequence[str]], tag_ids: Sequence[Sequence[int]], labels: Sequence[str],
          tokenizer: PreTrainedTokenizerFast, max_length: int, label_all_pieces: bool = False) -> AlignedSentences:
    """Tokenize pre-split sentences (``is_split_into_words``), cut to ``max_length`` pieces with
    ``[CLS]`` and ``[SEP]``, and label their pieces with ``tag_ids`` (ids into ``labels``)."""
    # The I- tag of each label: what a B- word's continuation pieces learn (labels hold both per type).
    inside = [labels.index(f"I-{label[2:]}") if label.startswith("B-") else index for index, label in enumerate(labels)]
    encoded = tokenizer([list(words) for words in tokens], is_split_into_words=True, truncation=True,
                        max_length=max_length, return_attention_mask=False, return_token_type_ids=False)
    unknown_id = tokenizer.unk_token_id
    all_labels, first_pieces, counts = [], [], np.zeros(5, dtype=np.int64)  # AlignmentReport's, in its order
    for row, (words, tags) in enumerate(zip(tokens, tag_ids, strict=True)):
        ids, word_ids = encoded["input_ids"][row], encoded.word_ids(row)
        first = np.full(len(words), -1, dtype=np.int64)
        piece_labels, only_unknown = [IGNORED] * len(ids), np.ones(len(words), dtype=bool)
        previous = None
        for position, word in enumerate(word_ids):
            if word is None:
                previous = None
                continue
            only_unknown[word] &= ids[position] == unknown_id
            if word != previous:
                first[word] = position
                piece_labels[position] = tags[word]
            elif label_all_pieces:
                piece_labels[position] = inside[tags[word]]
            previous = word
        missing = first < 0
        # In a sentence that filled max_length, the words after the last one that kept a piece were cut
        # off; any other word without a piece tokenized to nothing.
        kept = np.flatnonzero(~missing)
        cut = missing & (len(ids) >= max_length) & (np.arange(len(words)) > (kept[-1] if len(kept) else -1))
        counts += (len(words), cut.sum(), cut.any(), (missing & ~cut).sum(), (only_unknown & ~missing).sum())
        all_labels.append(piece_labels)
        first_pieces.append(first)
    return AlignedSentences(encoded["input_ids"], all_labels, first_pieces, AlignmentReport(*map(int, counts)))
