"""Model-input sequences: packing or per-document splitting, padding, collation, bucketing.

Sequences are not copies of the tokens: a :class:`SplitIndex` says where each one lies in the
token store's stream (``[CLS]`` + a slice, + ``[SEP]`` where the slice does not end with one), and
:class:`IndexedSequences` reads them from the memory-mapped store when a batch needs them.
Padding and attention masks are made per batch by :class:`Collator`, so the same index serves
static padding (the tutorial's ``max_length`` padding) and dynamic padding to a multiple of 8.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bert_mlm.config import SequenceConfig
from bert_mlm.core.data.corpus import SPLITS
from bert_mlm.core.data.reuse import code_digest
from bert_mlm.core.tokens.token_store import TokenSplit
from bert_mlm.core.tokens.words import WORD_SCHEMES
from bert_mlm.errors import UserError


@dataclass
class SplitIndex:
    """Sequence ``i`` is ``[CLS] + stream[starts[i] : starts[i] + counts[i]]``, followed by
    ``[SEP]`` where ``add_sep[i]`` (a document piece that does not reach its document's end)."""

    starts: np.ndarray
    counts: np.ndarray
    add_sep: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def lengths(self) -> np.ndarray:
        return self.counts.astype(np.int32) + 1 + self.add_sep

    def __getitem__(self, part: slice) -> SplitIndex:
        return SplitIndex(self.starts[part], self.counts[part], self.add_sep[part])


def _count_dtype(max_length: int) -> np.dtype:
    return np.dtype(np.uint16) if max_length <= np.iinfo(np.uint16).max else np.dtype(np.int32)


def index_packed(split: TokenSplit, max_length: int, ranges: Sequence[tuple[int, int]] | None = None) -> SplitIndex:
    """Documents back to back, each followed by ``[SEP]``, cut into blocks of ``max_length``
    that start with ``[CLS]``. Every token is kept: the final block is shorter. ``ranges``: stretches
    of the stream packed apart (a mixture's sources: no block holds two sources' text)."""
    body, ranges = max_length - 1, ranges or [(0, split.num_tokens)]
    pieces = [np.arange(start, stop, body, dtype=np.int64) for start, stop in ranges]
    starts = np.concatenate(pieces)
    stops = np.repeat([stop for _, stop in ranges], [len(piece) for piece in pieces])
    counts = np.minimum(body, stops - starts).astype(_count_dtype(max_length))
    return SplitIndex(starts, counts, np.zeros(len(starts), dtype=bool))


def index_documents(split: TokenSplit, max_length: int, chunk_documents: int = 1 << 20) -> SplitIndex:
    """One document per sequence, ``[CLS] doc [SEP]``; longer documents become several."""
    body = max_length - 2
    parts = [(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))]
    for first in range(0, len(split), chunk_documents):  # bounded temporaries on huge splits
        offsets = np.asarray(split.offsets[first : first + chunk_documents + 1], dtype=np.int64)
        lengths = np.diff(offsets) - 1  # without the separator
        pieces = -(-lengths // body)
        document = np.repeat(np.arange(len(lengths)), pieces)
        piece = np.arange(len(document)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        remaining = lengths[document] - piece * body
        last = remaining <= body
        parts.append((
            offsets[document] + piece * body,
            np.where(last, remaining + 1, body),  # a last piece takes the stream's own [SEP]
            ~last,
        ))
    starts, counts, add_sep = (np.concatenate(column) for column in zip(*parts, strict=True))
    return SplitIndex(starts, counts.astype(_count_dtype(max_length)), add_sep)


def index_split(split: TokenSplit, mode: str, max_length: int,
                ranges: Sequence[tuple[int, int]] | None = None) -> SplitIndex:
    """``mode``: ``sequences.mode`` (a document never spans two sources: no ``ranges`` needed)."""
    return index_packed(split, max_length, ranges) if mode == "packed" else index_documents(split, max_length)


class IndexedSequences(Sequence):
    """The sequences of one split, read from the token stream on access (int32 arrays).

    ``words``: the split's stored word-continuation bits (rjieba or jieba segmentation), when there
    are, made under the stored scheme ``word_scheme`` (:data:`bert_mlm.core.tokens.words.WORD_SCHEMES`)."""

    def __init__(self, split: TokenSplit, index: SplitIndex, cls_id: int, sep_id: int, words: np.ndarray | None = None,
                 word_scheme: int | None = None, sources: list | None = None):
        self.split, self.index, self.cls_id, self.sep_id = split, index, int(cls_id), int(sep_id)
        self.words, self.word_scheme = words, word_scheme
        self.sources = sources  # a mixture's SourceSpans (the train split)
        self.mixture = None  # the MixturePlan training draws its epochs by (core.tokens.blend)

    def __len__(self) -> int:
        return len(self.index)

    @functools.cached_property
    def lengths(self) -> np.ndarray:
        return self.index.lengths

    def __getitem__(self, i):
        if isinstance(i, slice):  # a view of those sequences, not their tokens
            return IndexedSequences(self.split, self.index[i], self.cls_id, self.sep_id, self.words, self.word_scheme)
        start, count, add_sep = int(self.index.starts[i]), int(self.index.counts[i]), bool(self.index.add_sep[i])
        sequence = np.empty(1 + count + add_sep, dtype=np.int32)
        sequence[0] = self.cls_id
        sequence[1 : 1 + count] = self.split.tokens[start : start + count]
        if add_sep:
            sequence[-1] = self.sep_id
        return sequence

    def continuations(self, indices, width: int) -> np.ndarray:
        """Per token of the sequences at ``indices``, whether it continues the word before it
        (stored words), as one ``(len(indices), width)`` matrix (``False`` at [CLS], an added
        [SEP] and past each sequence): one vectorised gather of bits, not a loop over rows."""
        indices = np.asarray(indices)
        counts = self.index.counts[indices].astype(np.int64)
        columns = np.arange(width - 1)
        inside = columns[None, :] < counts[:, None]
        positions = np.where(inside, self.index.starts[indices][:, None] + columns[None, :], 0)
        flags = np.zeros((len(indices), width), dtype=bool)
        flags[:, 1:] = ((self.words[positions >> 3] >> (positions & 7)) & 1).astype(bool) & inside
        return flags

    @property
    def fingerprint(self) -> str:
        """Identifies the sequences' content: the store split's digest, the index, and the scheme of
        the stored word bits (so that a tuning study or a checkpoint never mixes runs on two
        segmentations; jieba's scheme 1, the first, adds nothing: fingerprints made before stay)."""
        digest = hashlib.blake2b(self.split.digest.encode(), digest_size=10)
        for array in (self.index.starts, self.index.counts, self.index.add_sep):
            digest.update(np.ascontiguousarray(array).tobytes())
        if self.words is not None and self.word_scheme not in (None, 1):
            digest.update(f"word scheme {self.word_scheme}".encode())
        if self.mixture is not None:  # what an epoch draws: a changed weight is another run (and study)
            digest.update(repr((self.mixture.spans, self.mixture.counts)).encode())
        return digest.hexdigest()


def sequence_lengths(sequences: Sequence[np.ndarray]) -> np.ndarray:
    if isinstance(sequences, IndexedSequences):
        return sequences.lengths
    return np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))


def build_sequences(documents: Sequence[np.ndarray], mode: str, max_length: int, cls_id: int,
                    sep_id: int) -> list[np.ndarray]:
    """In-memory sequences of a list of documents (small data; the pipeline indexes the store)."""
    split = TokenSplit.from_documents(documents, sep_id)
    return list(IndexedSequences(split, index_split(split, mode, max_length), cls_id, sep_id))


def padded_length(length: int, multiple: int = 8) -> int:
    return -(-length // multiple) * multiple


@dataclass
class Collator:
    """Pads a list of sequences into ``input_ids``, ``attention_mask``, ``special_tokens_mask``.

    ``static`` pads to ``max_length``; ``dynamic`` pads to the longest sequence of the batch,
    rounded up to a multiple of 8 (tensor-core friendly shapes on GPUs). With ``whole_word`` it
    adds ``word_starts`` for whole-word masking: a token starts a word unless it is one of
    ``continuation_ids`` (WordPiece ``##`` pieces) or the stored word bits say it continues one.
    """

    pad_id: int
    special_ids: Sequence[int]
    max_length: int
    padding: str = "dynamic"
    whole_word: bool = False
    continuation_ids: Sequence[int] = ()

    def __post_init__(self) -> None:
        self._special = np.asarray(sorted(set(self.special_ids)), dtype=np.int64)
        size = max([*self.continuation_ids, *self._special.tolist(), self.pad_id]) + 1
        self._continues = np.zeros(size, dtype=bool)
        self._continues[np.asarray(self.continuation_ids, dtype=np.int64)] = True

    def collate(self, sequences: Sequence[np.ndarray], indices) -> dict[str, torch.Tensor]:
        """The batch of ``sequences[i] for i in indices``, with their stored word bits if needed."""
        rows = [sequences[i] for i in indices]
        stored = None
        if self.whole_word and getattr(sequences, "words", None) is not None:
            stored = sequences.continuations(indices, self.max_length)
        return self(rows, stored)

    def __call__(self, sequences: Sequence[np.ndarray], continuations: np.ndarray | None = None
                 ) -> dict[str, torch.Tensor]:
        """``continuations``: stored word bits per row (a matrix at least as wide as the batch),
        for whole-word masking."""
        # Built in NumPy and handed to torch without a copy: 5x faster than filling torch
        # tensors row by row (bench/run_all.py --sections masking).
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        longest = int(lengths.max())
        if longest > self.max_length:
            raise ValueError(f"a sequence of {longest} tokens exceeds max_length {self.max_length}")
        width = self.max_length if self.padding == "static" else min(padded_length(longest), self.max_length)
        input_ids = np.full((len(sequences), width), self.pad_id, dtype=np.int64)
        for row, seq in enumerate(sequences):
            input_ids[row, : len(seq)] = seq
        attention_mask = np.arange(width)[None, :] < lengths[:, None]
        special = np.isin(input_ids, self._special) | ~attention_mask
        batch = {"input_ids": torch.from_numpy(input_ids),
                 "attention_mask": torch.from_numpy(attention_mask.astype(np.int64)),
                 "special_tokens_mask": torch.from_numpy(special.astype(np.int64))}
        if self.whole_word:
            batch["word_starts"] = torch.from_numpy(self._word_starts(input_ids, special, continuations))
        return batch

    def _word_starts(self, input_ids: np.ndarray, special: np.ndarray, continuations) -> np.ndarray:
        known = len(self._continues)
        continues = self._continues[np.minimum(input_ids, known - 1)] & (input_ids < known)
        if continuations is not None:
            continues |= continuations[:, : input_ids.shape[1]]
        starts = ~continues | special
        starts[:, 1:] |= special[:, :-1]  # a piece right after [CLS] (a packed block's cut) starts a word
        starts[:, 0] = True
        return starts


@dataclass
class SequenceIndex:
    """Where every sequence of every split lies in a token store, and which store that is."""

    mode: str
    max_length: int
    splits: dict[str, SplitIndex]
    store_digests: dict[str, str]
    # Word boundaries: the segmenter ``masking.word_segmenter`` resolved to (``wordpiece``, ``rjieba``
    # or ``jieba``); for the last two, per split the stored continuation bits (None: not segmented,
    # because no whole-word masking was asked for) and their scheme; ``word_files``: the token
    # store's bits files (path, bits) that saving the index places beside it (the encoding stage
    # wrote them).
    word_segmenter: str = "wordpiece"
    words: dict[str, np.ndarray] | None = None
    word_files: dict[str, tuple] | None = None
    word_scheme: int | None = None
    # A mixture's sources in the train split: (name, first sequence) in index order (None: one corpus).
    sources: list[tuple[str, int]] | None = None
    # What made this index, for reusing a stored one (core/data/reuse.py; None: not reused), and whether to.
    recipe: dict | None = None
    reuse: bool = False

    def check_words(self, whole_word: bool, segmenter: str, what: str = "masking.whole_word") -> None:
        """Refuse whole-word masking that needs stored word boundaries this index does not hold
        (none, or another segmenter's)."""
        wanted = self.word_segmenter if segmenter == "auto" else segmenter
        if not whole_word or wanted == "wordpiece":
            return
        if self.words is None or wanted != self.word_segmenter:
            held = (f"holds {self.word_segmenter} words" if self.words is not None
                    else "holds none (it was built without whole-word masking)")
            raise UserError(f"{what}: whole-word masking on {wanted} words needs word boundaries that sequence_index "
                            f"{held}; run the sequences pipeline with it, e.g. `kedro run --pipelines sequences,"
                            f"training,evaluation --params masking.whole_word=true,masking.word_segmenter={wanted}`")

    def sequences(self, store, split: str, cls_id: int, sep_id: int) -> IndexedSequences:
        """The split's sequences read from ``store``, which must be the store this index was built on."""
        if store.digest(split) != self.store_digests.get(split):
            raise UserError(f"sequence_index: built on another token store than {str(store.directory)!r} ({split} "
                            "split); run the sequences pipeline again (or the data stages) so that both come from one "
                            "run")
        words = self.words.get(split) if self.words is not None else None
        return IndexedSequences(store.split(split), self.splits[split], cls_id, sep_id, words, self.word_scheme,
                                self.source_spans() if split == "train" else None)

    def source_spans(self) -> list | None:
        """The train split's sources as :class:`~bert_mlm.core.tokens.blend.SourceSpan` (None: one corpus)."""
        from bert_mlm.core.tokens.blend import SourceSpan

        if not self.sources:
            return None
        stops = [first for _, first in self.sources[1:]] + [len(self.splits["train"])]
        return [SourceSpan(name, first, stop) for (name, first), stop in zip(self.sources, stops, strict=True)]


def build_sequence_index(store, config: SequenceConfig, splits: Sequence[str], word_segmenter: str = "wordpiece",
                         store_words: bool = False) -> SequenceIndex:
    """Every split's index; a mixture's train split is indexed source by source (no sequence holds
    two sources' text), and where each source's sequences start is kept (training samples them).
    With ``store_words`` the index takes the store's word boundaries (``store.word_bits``)."""
    ranges = store.source_ranges() if getattr(store, "sources", None) else None
    indexes = {
        split: index_split(store.split(split), config.mode, config.max_length,
                           [(start, stop) for _, start, stop in ranges] if ranges and split == "train" else None)
        for split in splits
    }
    sources = None
    if ranges and "train" in indexes:
        firsts = np.searchsorted(indexes["train"].starts, [start for _, start, _ in ranges])
        sources = [(name, int(first)) for (name, _, _), first in zip(ranges, firsts, strict=True)]
    return SequenceIndex(config.mode, config.max_length, indexes, {split: store.digest(split) for split in splits},
                         word_segmenter, words=None, sources=sources,
                         word_files={split: store.word_bits(split) for split in splits} if store_words else None,
                         word_scheme=store.word_scheme if store_words else None)


def index_token_store(store, tokenizer, config: SequenceConfig, segmenter: str, stored: str | None) -> SequenceIndex:
    """Every split's index (:func:`build_sequence_index`) with its recipe (core/data/reuse.py), for the
    word boundaries of ``segmenter`` (``stored``: the rjieba or jieba words the store must hold, or
    None). Refused in one line first: a store encoded with another vocabulary, damaged document
    offsets (indexing follows them), or word boundaries the store does not hold."""
    store.check_tokenizer(tokenizer.get_vocab())
    for split in SPLITS:
        store.verify_offsets(split)
    store.check_words(stored)
    index = build_sequence_index(store, config, SPLITS, segmenter, store_words=stored is not None)
    index.recipe = {
        "stage": "sequence_index", "code": code_digest("bert_mlm.core.tokens.sequences", "bert_mlm.core.tokens.words"),
        "store": {split: [store.digest(split), store.manifest["splits"][split].get("offsets_digest")]
                  for split in SPLITS},
        "sources": store.sources, "mode": config.mode, "max_length": config.max_length,
        "word_segmenter": segmenter, "words": WORD_SCHEMES[stored] if stored else None,
        "tokenizer": hashlib.blake2b(tokenizer.backend_tokenizer.to_str().encode(), digest_size=10).hexdigest(),
    }
    return index
