"""Entity-level scores of a tagger, strict IOB2: an entity counts when its span and type match
exactly (seqeval's ``classification_report(..., mode="strict", scheme=IOB2)``, which the tests
check it equals, score for score).

Written here rather than calling seqeval because the interval of a gain resamples the eval
sentences thousands of times: the entities are counted once per sentence and type (true positives,
predicted, gold) with array operations, and any resample's scores are sums of those counts.

Strict IOB2: an entity is a ``B-X`` and the ``I-X`` tags that follow it; an ``I-`` tag after ``O``
or after another type starts nothing (:mod:`core.finetune.tag_schemes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bert_mlm.core.common.statistics import ratios
from bert_mlm.core.finetune.tag_schemes import sentence_starts

OUTSIDE, BEGIN, INSIDE = 0, 1, 2


@dataclass(frozen=True)
class TagCodes:
    """An IOB2 label list read once: per label id its prefix (``OUTSIDE``, ``BEGIN``, ``INSIDE``)
    and the index of its entity type in ``types`` (-1 for ``O``)."""

    labels: tuple[str, ...]
    types: tuple[str, ...]
    prefix: np.ndarray
    kind: np.ndarray

    @classmethod
    def of(cls, labels: Sequence[str]) -> TagCodes:
        types = tuple(sorted({label[2:] for label in labels if label != "O"}))
        index = {name: position for position, name in enumerate(types)}
        prefix = np.array([OUTSIDE if label == "O" else {"B": BEGIN, "I": INSIDE}[label[0]] for label in labels])
        kind = np.array([-1 if label == "O" else index[label[2:]] for label in labels], dtype=np.int64)
        return cls(tuple(labels), types, prefix, kind)


def entity_spans(tag_ids: np.ndarray, sentence_starts: np.ndarray, codes: TagCodes) -> np.ndarray:
    """Every strict-IOB2 entity of sentences flattened into ``tag_ids`` (``sentence_starts``: a
    boolean per position) as rows ``(first position, end position (exclusive), type index)``."""
    prefix, kind = codes.prefix[tag_ids], codes.kind[tag_ids]
    continues = np.zeros(len(tag_ids), dtype=bool)
    continues[1:] = (prefix[1:] == INSIDE) & (prefix[:-1] != OUTSIDE) & (kind[1:] == kind[:-1])
    continues &= ~sentence_starts
    first = np.flatnonzero(prefix == BEGIN)
    # An entity ends where the next position that does not continue one is (or at the end).
    breaks = np.append(np.flatnonzero(~continues), len(tag_ids))
    end = breaks[np.searchsorted(breaks, first, side="right")]
    return np.stack([first, end, kind[first]], axis=1)


@dataclass
class EntityCounts:
    """Per eval sentence and entity type: true positives, predicted and gold entities; per
    sentence: tags predicted right, and tags. Every score is a ratio of sums of these, so that a
    resample of the sentences (``weights``) is scored by sums alone."""

    types: tuple[str, ...]
    true_positives: np.ndarray  # (sentences, types)
    predicted: np.ndarray
    gold: np.ndarray
    correct_tags: np.ndarray  # (sentences,)
    tags: np.ndarray

    @classmethod
    def of(cls, gold_ids: np.ndarray, predicted_ids: np.ndarray, lengths: np.ndarray, codes: TagCodes) -> EntityCounts:
        """The counts of predictions against gold tags, both label ids of the sentences'
        words flattened, ``lengths`` the words of each sentence."""
        gold_ids, predicted_ids = np.asarray(gold_ids, np.int64), np.asarray(predicted_ids, np.int64)
        lengths = np.asarray(lengths, np.int64)
        if len(gold_ids) != len(predicted_ids) or len(gold_ids) != lengths.sum():
            raise ValueError(f"{len(predicted_ids)} predicted and {len(gold_ids)} gold tags for {lengths.sum()} words")
        sentences, kinds, total = len(lengths), len(codes.types), len(gold_ids)
        offsets, starts = np.cumsum(lengths) - lengths, sentence_starts(lengths, total)
        gold, predicted = entity_spans(gold_ids, starts, codes), entity_spans(predicted_ids, starts, codes)

        def key(spans: np.ndarray) -> np.ndarray:  # one integer per (first, end, type): the spans' identity
            return (spans[:, 0] * (total + 1) + spans[:, 1]) * max(kinds, 1) + spans[:, 2]

        hits = np.isin(key(predicted), key(gold))

        def per_sentence(spans: np.ndarray) -> np.ndarray:
            sentence = np.searchsorted(offsets, spans[:, 0], side="right") - 1
            cells = np.bincount(sentence * kinds + spans[:, 2], minlength=sentences * kinds)
            return cells.reshape(sentences, kinds)

        word_sentence = np.repeat(np.arange(sentences), lengths)
        correct = np.bincount(word_sentence, weights=gold_ids == predicted_ids, minlength=sentences)
        return cls(codes.types, per_sentence(predicted[hits]), per_sentence(predicted), per_sentence(gold),
                   correct.astype(np.int64), lengths.copy())

    def __len__(self) -> int:
        return len(self.tags)

    def micro_f1_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per sentence, the numerator and denominator of the micro entity F1 (``2 tp`` over
        ``predicted + gold``): F1 of any set of sentences is the ratio of their sums."""
        return 2.0 * self.true_positives.sum(1), (self.predicted.sum(1) + self.gold.sum(1)).astype(np.float64)

    def scores(self) -> dict:
        """Entity precision, recall and F1 (micro over the types), token accuracy, and per type
        ``{type: {precision, recall, f1, support}}``; a ratio with nothing to divide is 0, as in
        seqeval."""
        true_positives, predicted, gold = (a.sum(0) for a in (self.true_positives, self.predicted, self.gold))
        micro = _prf(true_positives.sum(keepdims=True), predicted.sum(keepdims=True), gold.sum(keepdims=True))
        per_type = _prf(true_positives, predicted, gold)
        tags = int(self.tags.sum())
        return {
            "precision": float(micro[0][0]), "recall": float(micro[1][0]), "f1": float(micro[2][0]),
            "support": int(gold.sum()), "token_accuracy": float(self.correct_tags.sum() / tags) if tags else 0.0,
            "per_type": {name: {"precision": float(per_type[0][i]), "recall": float(per_type[1][i]),
                                "f1": float(per_type[2][i]), "support": int(gold[i])}
                         for i, name in enumerate(self.types)},
        }


def _prf(true_positives: np.ndarray, predicted: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, ...]:
    """Precision, recall and F1 computed as seqeval computes them (F1 from precision and recall,
    in that order of operations), so that the two agree to the last bit."""
    precision, recall = ratios(true_positives, predicted), ratios(true_positives, gold)
    denominator = precision + recall
    return precision, recall, 2.0 * precision * recall / np.where(denominator == 0, 1.0, denominator)
