"""Word boundaries for whole-word masking.

A token *continues* a word when it is not the word's first piece. Two sources:

- ``wordpiece``: a ``##`` piece continues the word before it (Google's BERT and fairseq's
  whole-word masking for space-separated text). A property of the token id, looked up per batch:
  nothing is stored.
- ``rjieba`` / ``jieba``: Chinese has no spaces and BERT gives every CJK character its own token,
  so the words come from a segmenter (Chinese BERT-wwm, Cui et al. 2019; Hugging Face's
  ``run_chinese_ref.py`` reference files). A token continues a word when its first character is
  not where a word starts. These flags are computed while the corpus is encoded (one pass over
  the text) and stored beside the token stream, one bit per token, so that masking a batch stays
  a table lookup.

  ``rjieba`` (jieba-rs, the Rust port of jieba) with :func:`jieba_ascii_starts` gives jieba's word
  starts exactly on ChnSentiCorp (7,765 reviews) and msra-ner's news (46,000 sentences), 14-22x
  faster (bench/word_segmenters.py, BENCHMARKS.md "Chinese data path"); ``jieba`` is the Python
  original. Each has its own stored scheme (:data:`WORD_SCHEMES`): bits of one are never read as
  the other's.

``auto`` picks rjieba (jieba when rjieba is not installed) when most of the text's letters are CJK.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bert_mlm.config.masking import SEGMENTERS
from bert_mlm.core.common.text import cjk_characters
from bert_mlm.core.tokens.cjk_encoding import (
    encoding_backend,
    fast_encoder,
    library_encode,
    text_starts,
    with_separators,
)
from bert_mlm.core.tokens.tokenizer import CJK_MAJORITY
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

# Segmenters whose word starts are computed once and stored beside the token store, and the
# scheme number stored with their bits. A scheme changes whenever the same text would get other
# bits, so that stored bits, tuning studies and checkpoints of one are never taken for another's.
WORD_SCHEMES = {"jieba": 1, "rjieba": 2}
STORED_SEGMENTERS = tuple(WORD_SCHEMES)
WORDS_SUFFIX = "words.bits"
# Characters of the train split that decide ``auto`` (rjieba for mostly-CJK text).
SEGMENTER_SAMPLE_CHARS = 200_000


def cjk_share(texts: Iterable[str]) -> float:
    """Share of CJK characters among the letters (whitespace, digits and punctuation left out)."""
    cjk = letters = 0
    for text in texts:
        cjk += cjk_characters(text)
        letters += sum(map(str.isalpha, text))
    return cjk / letters if letters else 0.0


def resolve_segmenter(segmenter: str, sample: Iterable[str]) -> str:
    """``auto`` -> ``rjieba`` (``jieba`` where rjieba is not installed) when most letters of
    ``sample`` are CJK, else ``wordpiece``."""
    if segmenter not in SEGMENTERS:  # a library caller's value (the parameters' is checked by its type)
        raise UserError(f"masking.word_segmenter: {segmenter!r} is not one of {SEGMENTERS}")
    if segmenter != "auto":
        return segmenter
    if cjk_share(sample) <= CJK_MAJORITY:
        return "wordpiece"
    try:
        import rjieba  # noqa: F401
    except ImportError:
        logger.info("masking.word_segmenter: auto takes jieba: rjieba (the 15x faster Rust port) is not installed")
        return "jieba"
    return "rjieba"


def stored_word_segmenter(segmenter: str, whole_word_requested: bool, sample: Iterable[str]) -> tuple[str, str | None]:
    """``masking.word_segmenter`` resolved on ``sample`` (the train split's first characters), and
    the segmenter whose word boundaries the encoding stage stores beside the tokens: that one when
    it is rjieba or jieba and some part of the run masks whole words, else None. The tokenization
    and sequences stages both ask this, of the same documents, and so agree."""
    resolved = resolve_segmenter(segmenter, sample)
    return resolved, resolved if resolved in STORED_SEGMENTERS and whole_word_requested else None


def continuation_ids(vocabulary: dict[str, int]) -> np.ndarray:
    """Ids of the WordPiece pieces that continue a word (``##...``)."""
    return np.asarray(sorted(i for token, i in vocabulary.items() if token.startswith("##") and len(token) > 2),
                      dtype=np.int64)


@functools.lru_cache(maxsize=1)
def _jieba():
    import jieba  # imported on first use: it builds its prefix dictionary (~0.5 s)

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _rjieba():
    try:
        import rjieba
    except ImportError as error:
        raise UserError("masking.word_segmenter: rjieba is not installed; pip install rjieba, or choose jieba"
                        ) from error
    return rjieba


# jieba's HMM pass (``jieba.finalseg``) cuts a run of non-Han characters into [a-zA-Z0-9]+(.digits)(%)
# pieces and the stretches between them; jieba-rs keeps such a run whole ("24-26", "xxx.com").
_JIEBA_ASCII_PIECE = re.compile(r"([a-zA-Z0-9]+(?:\.\d+)?%?)")
_NOT_ALPHANUMERIC = re.compile(r"[^a-zA-Z0-9]")
_JIEBA_DICTIONARY_ASCII = frozenset({"AT&T", "C#", "C++", "c#", "c++"})  # kept whole by jieba's dictionary


def jieba_ascii_starts(word: str, start: int) -> list[int]:
    """Where jieba's own words start inside an ASCII word of jieba-rs (``[start]`` when it
    would not cut it): with this, rjieba's word starts equal jieba's on both Chinese corpora
    (bench/word_segmenters.py), where without it 242 of 3,000 reviews' starts differed, all
    inside runs such as "24-26" and "hotel.com"."""
    if (len(word) < 2 or not word.isascii() or word in _JIEBA_DICTIONARY_ASCII
            or not _NOT_ALPHANUMERIC.search(word) or not _JIEBA_ASCII_PIECE.search(word)):
        return [start]
    starts, position = [], start
    for piece in _JIEBA_ASCII_PIECE.split(word):
        if piece:
            starts.append(position)
            position += len(piece)
    return starts


# Per ASCII code: 1 a letter or digit, 2 punctuation, 0 anything else (and 128: any non-ASCII
# character). Where a 1 stands beside a 2, jieba-rs's word may need jieba's cuts.
_ASCII_KIND = np.zeros(129, dtype=np.uint8)
_ASCII_KIND[[ord(c) for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]] = 1
_ASCII_KIND[[c for c in range(33, 127) if not chr(c).isalnum()]] = 2


def word_starts(text: str, segmenter: str) -> list[int]:
    """Character offsets where the words of ``text`` start, by ``segmenter`` (rjieba or jieba)."""
    if segmenter == "jieba":
        return [start for _, start, _ in _jieba().tokenize(text)]
    return np.unique(word_starts_array(text)).tolist()


def word_starts_array(text: str) -> np.ndarray:
    """rjieba's word starts with jieba's cuts inside ASCII runs (unordered), for a whole batch of texts
    joined by newlines at once (a newline ends jieba's blocks: no word crosses it, each text is cut
    as alone). rjieba's own cut is ~75 % of the time; the ASCII check is vectorised (a regular
    expression's scan of the text cost a tenth of the cut, even with nothing to find)."""
    words = _rjieba().cut(text)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    starts = np.cumsum(lengths) - lengths
    kind = _ASCII_KIND[np.minimum(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32), 128)]
    mixed = np.flatnonzero((kind[:-1] | kind[1:]) == 3)
    if not len(mixed):
        return starts
    extra = []
    for index in np.unique(np.searchsorted(starts, mixed, side="right") - 1).tolist():
        word = words[index]
        if word.isascii() and len(word) > 1:
            extra.extend(jieba_ascii_starts(word, int(starts[index]))[1:])
    return np.concatenate((starts, np.asarray(extra, dtype=np.int64))) if extra else starts


def segment_texts(texts: list[str], tokenizer_json: str, separator_id: int, dtype: str,
                  segmenter: str = "jieba") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~bert_mlm.core.tokens.token_store.encode_texts` (ids, document lengths) with one
    word-continuation flag per token (``False`` at each separator), for stored word boundaries. The
    text is encoded once, with the offsets the word starts are matched against (a second encoding
    pass cost as much as the segmentation: BENCHMARKS.md "Chinese data path"). Pure, run on the
    engine's workers: jieba ~0.1-0.2 M characters/s per core, rjieba with the flags ~7.5 M."""
    joined = "\n".join(texts)  # rjieba cuts all texts at once; the offsets are found within the same string
    fast = fast_encoder(tokenizer_json)
    if fast is not None:  # BERT's encoding with offsets, vectorised (core/tokens/cjk_encoding.py)
        ids, positions, per_text = fast.encode_flat(texts, offsets=True, joined=joined)
    else:
        ids, positions, per_text = library_encode(encoding_backend(tokenizer_json), texts, offsets=True)
        positions += np.repeat(text_starts(texts), per_text)
    word_start = np.zeros(len(joined) + 1, dtype=bool)
    if segmenter == "rjieba":
        word_start[word_starts_array(joined)] = True
    else:
        start = 0
        for text in texts:
            if text:
                word_start[np.asarray(word_starts(text, segmenter), dtype=np.int64) + start] = True
            start += len(text) + 1
    continues = ~word_start[positions]
    tokens, lengths = with_separators(ids, per_text, separator_id, dtype)
    return tokens, lengths, with_separators(continues, per_text, False)[0]


class BitWriter:
    """Appends booleans to a file as packed bits (little bit order), whatever the chunk sizes."""

    def __init__(self, path: Path):
        self.handle = open(path, "wb")
        self.pending = np.zeros(0, dtype=bool)
        self.count = 0

    def write(self, flags: np.ndarray) -> None:
        flags = np.concatenate([self.pending, np.asarray(flags, dtype=bool)])
        whole = len(flags) - len(flags) % 8
        self.handle.write(np.packbits(flags[:whole], bitorder="little").tobytes())
        self.pending = flags[whole:]
        self.count += whole

    def close(self) -> int:
        if len(self.pending):
            self.handle.write(np.packbits(self.pending, bitorder="little").tobytes())
        total = self.count + len(self.pending)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        return total


def words_path(directory: Path, split: str) -> Path:
    return directory / f"{split}.{WORDS_SUFFIX}"
