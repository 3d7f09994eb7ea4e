"""BERT's WordPiece encoding of mostly-CJK text, vectorised: the same token ids as ``tokenizers``,
~10x faster on Chinese.

Why not only the library: ``tokenizers`` spends ~2.5 microseconds per Chinese character (its
BERT pre-tokenizer makes every character a word with its own offsets and string), 0.3-0.7 M
characters per second on two cores here, which made encoding and the word segmentation's second
encoding most of the Chinese data path's time (BENCHMARKS.md "Chinese data path").

How it stays the library's encoding: with ``handle_chinese_chars`` BERT's normaliser puts spaces
around every CJK character, and its pre-tokenizer splits at whitespace and isolates every
punctuation character. So a CJK or punctuation character ("single") is always a word of its own,
encoded the same wherever it stands: each one's ids are asked of ``tokenizers`` once (encoding the
character alone) and looked up after that. Whitespace only separates. Every other stretch of text
("run": Latin words, digits, emoji, control or combining characters, anything not known to be safe)
is handed to ``tokenizers`` whole, so lowercasing, accents, [UNK] for long words and WordPiece are
the library's own. Texts holding an added token's text ("[MASK]") go to the library whole.
Tokenizers of another shape (not BertNormalizer with handle_chinese_chars + BertPreTokenizer +
WordPiece) are not handled here (:func:`fast_encoder` returns ``None``). The tests compare both
Chinese corpora, English text and random Unicode against ``tokenizers`` id by id, and the word
segmentation checks every batch it encodes against the token store's own bytes.
"""

from __future__ import annotations

import functools
import itertools
import json
import multiprocessing
import re
import unicodedata

import numpy as np
from tokenizers import Tokenizer

from bert_mlm.core.data.corpus import in_pieces

RUN, SINGLE, SPACE = 0, 1, 2
_UNKNOWN, _IRREGULAR = -2, -3
# The CJK blocks BERT's normaliser isolates (tokenizers' is_chinese_char).
CHINESE_BLOCKS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                  (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# Mostly CJK: below this share of "single" characters a batch goes to tokenizers as it is.
MIN_SINGLE_SHARE = 0.3


def is_punctuation(character: str) -> bool:
    """BERT's rule: ASCII's symbols and Unicode's P* categories (its pre-tokenizer splits them off)."""
    return character in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" or unicodedata.category(character).startswith("P")


def is_chinese(character: str) -> bool:
    return any(low <= ord(character) <= high for low, high in CHINESE_BLOCKS)


@functools.lru_cache(maxsize=1)
def character_classes() -> np.ndarray:
    """Per code point: SINGLE (a CJK character, or punctuation: ASCII's or Unicode's P* categories,
    as BERT's pre-tokenizer isolates them), SPACE (tab, newline, CR, Z* categories: white space to
    both the normaliser and the pre-tokenizer), else RUN."""
    classes = np.zeros(0x110000, dtype=np.uint8)
    for low, high in CHINESE_BLOCKS:
        classes[low : high + 1] = SINGLE
    for code in range(0x10000):
        if is_punctuation(chr(code)):
            classes[code] = SINGLE
        elif unicodedata.category(chr(code)) in ("Zs", "Zl", "Zp") or code in (9, 10, 13):
            classes[code] = SPACE
    return classes


@functools.lru_cache(maxsize=4)
def encoding_backend(serialised: str) -> Tokenizer:
    """The Rust tokenizer of ``serialised``, set to encode documents whole: a transformers
    tokenizer once called with padding or truncation (fill-mask, the probe) keeps them in its
    backend's state, and so in ``to_str()``; a stored document must be neither padded nor cut.
    Cached: one parse per process (data-engine workers get the string)."""
    tokenizer = Tokenizer.from_str(serialised)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


class FastBertEncoder:
    """Encodes texts as :func:`encoding_backend` of the same tokenizer does."""

    def __init__(self, tokenizer_json: str):
        self.backend = encoding_backend(tokenizer_json)
        added = [token["content"] for token in json.loads(tokenizer_json).get("added_tokens", [])]
        self.added = re.compile("|".join(map(re.escape, added))) if added else None
        self.classes = character_classes()
        self.single_ids = np.full(0x110000, _UNKNOWN, dtype=np.int64)

    def _learn_singles(self, codes: np.ndarray) -> None:
        """Ask tokenizers once, for each candidate single character not seen yet, whether it stands
        alone between two letters and as which one token (its Unicode tables may be older than
        Python's: U+2E4B is punctuation to Python 3.11, a letter to them). Those that do not are
        handled as run characters, inside the library's own words."""
        unknown = _distinct(codes[self.single_ids[codes] == _UNKNOWN])
        if not len(unknown):
            return
        letter = self.backend.encode("a", add_special_tokens=False).ids
        for code in unknown.tolist():
            encoding = self.backend.encode(f"a{chr(code)}a", add_special_tokens=False)
            ids = encoding.ids
            alone = len(letter) == 1 and len(ids) == 3 and ids[0] == ids[2] == letter[0]
            self.single_ids[code] = ids[1] if alone else _IRREGULAR

    def encode_flat(self, texts: list[str], offsets: bool = False,
                    joined: str | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Every text's token ids back to back (int64), with ``offsets`` each token's first character
        within its text, and the number of tokens of each text. Given ``joined`` (the texts joined
        by newlines, which the caller has made anyway), the offsets are within it instead."""
        if not texts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64) if offsets else None, np.zeros(0, np.int64)
        within_joined = joined is not None
        joined = "\n".join(texts) if joined is None else joined  # white space between texts: no run crosses two
        codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        kinds = self.classes[codes]
        singles = kinds == SINGLE
        special = self.added is not None and self.added.search(joined) is not None
        if singles.mean() < MIN_SINGLE_SHARE or special:  # little to gain, or an added token's text: the library
            ids, positions, per_text = library_encode(self.backend, texts, offsets)
            if offsets and within_joined:
                positions += np.repeat(text_starts(texts), per_text)
            return ids, positions, per_text
        self._learn_singles(codes[singles])
        singles &= self.single_ids[codes] != _IRREGULAR
        # Runs: stretches of everything else but white space, each encoded by the library whole
        # (a longer stretch than the library's words is always right: it splits it itself).
        in_run = ~singles & (kinds != SPACE)
        before = np.concatenate(([False], in_run[:-1]))
        after = np.concatenate((in_run[1:], [False]))
        run_start = np.flatnonzero(in_run & ~before)
        run_stop = np.flatnonzero(in_run & ~after) + 1
        run_ids, run_token_run, run_token_offset = self._runs(joined, run_start, run_stop, offsets)
        run_counts = np.bincount(run_token_run, minlength=len(run_start))

        single_at = np.flatnonzero(singles)
        events = np.concatenate((single_at, run_start))
        counts = np.concatenate((np.ones(len(single_at), dtype=np.int64), run_counts))
        order = np.argsort(events, kind="stable")
        events, counts = events[order], counts[order]
        is_run = order >= len(single_at)
        starts = np.cumsum(counts) - counts
        ids = np.empty(int(counts.sum()), dtype=np.int64)
        ids[starts[~is_run]] = self.single_ids[codes[events[~is_run]]]
        # The runs' tokens, in run order, go where their runs' events are.
        run_slot = np.empty(len(run_start), dtype=np.int64)
        run_slot[order[is_run] - len(single_at)] = starts[is_run]
        run_token_at = run_slot[run_token_run] + _within(run_counts)
        ids[run_token_at] = run_ids
        text_of_char = np.repeat(np.arange(len(texts)), [len(t) + 1 for t in texts])[: len(codes)]
        per_text = np.bincount(text_of_char[events], weights=counts, minlength=len(texts)).astype(np.int64)
        positions = None
        if offsets:
            positions = np.empty(len(ids), dtype=np.int64)
            positions[starts[~is_run]] = events[~is_run]
            positions[run_token_at] = run_start[run_token_run] + run_token_offset
            if not within_joined:
                positions -= text_starts(texts)[text_of_char[positions]]
        return ids, positions, per_text

    def _runs(self, joined: str, run_start: np.ndarray, run_stop: np.ndarray,
              offsets: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The library's tokens of every run, in one call on the runs joined by spaces (each stays its
        own words: white space separates them): ids, each token's run, its first character in it."""
        if not len(run_start):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        pieces = [joined[a:b] for a, b in zip(run_start.tolist(), run_stop.tolist(), strict=True)]
        encoding = self.backend.encode(" ".join(pieces), add_special_tokens=False)
        token_start = np.fromiter((start for start, _ in encoding.offsets), dtype=np.int64, count=len(encoding.ids))
        lengths = run_stop - run_start
        piece_start = np.cumsum(lengths + 1) - lengths - 1  # where each run begins in the joined runs
        run_of_token = np.searchsorted(piece_start, token_start, side="right") - 1
        return (np.asarray(encoding.ids, dtype=np.int64), run_of_token,
                token_start - piece_start[run_of_token] if offsets else None)


# Texts handed to tokenizers at once: its per-token objects cost ~40x the text, so larger calls only
# cost memory (measured: the same speed at 1,000 and 100,000 documents per call).
ENCODE_SLICE_CHARS = 1 << 20


def library_encode(backend: Tokenizer, texts: list[str],
                   offsets: bool = False) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """:meth:`FastBertEncoder.encode_flat` by ``tokenizers`` itself, ~1 M characters at a time: on all
    cores in the main process, one text at a time in a pool worker (the library's thread pool
    deadlocks in a forked process when TOKENIZERS_PARALLELISM=true)."""
    in_worker = multiprocessing.parent_process() is not None
    method = backend.encode_batch if offsets else backend.encode_batch_fast
    ids, positions, per_text = [], [], []
    for piece in in_pieces(texts, ENCODE_SLICE_CHARS):
        encodings = ([backend.encode(text, add_special_tokens=False) for text in piece] if in_worker
                     else method(piece, add_special_tokens=False))
        flat, counts = flat_ids(encodings)
        ids.append(flat)
        per_text.append(counts)
        if offsets:
            positions.append(np.fromiter((o[0] for e in encodings for o in e.offsets), dtype=np.int64, count=len(flat)))
    flat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    return flat(ids), flat(positions) if offsets else None, flat(per_text)


def flat_ids(encodings) -> tuple[np.ndarray, np.ndarray]:
    """The encodings' ids back to back, and how many each has (one array per batch, not per document)."""
    per_text = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    ids = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), np.int64, int(per_text.sum()))
    return ids, per_text


def with_separators(ids: np.ndarray, per_text: np.ndarray, separator, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` with ``separator`` after each text's tokens (texts without tokens left out: they would be a
    lone separator), and the kept texts' lengths. Also for a per-token array beside the ids (``dtype``)."""
    kept = per_text > 0
    merged = np.insert(ids, np.cumsum(per_text)[kept], separator)
    return (merged.astype(dtype) if dtype else merged), per_text[kept]


def text_starts(texts: list[str]) -> np.ndarray:
    """Where each text starts in the texts joined by newlines."""
    return np.cumsum([0] + [len(text) + 1 for text in texts[:-1]])


def _distinct(codes: np.ndarray) -> np.ndarray:
    """The distinct code points, sorted (by counting: np.unique hashed 2.6 M of them in 2 s)."""
    return np.flatnonzero(np.bincount(codes)) if len(codes) else codes


def _within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., n-1 for each n of ``counts``, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


@functools.lru_cache(maxsize=4)
def fast_encoder(tokenizer_json: str) -> FastBertEncoder | None:
    """The vectorised encoder for a BERT-shaped tokenizer that isolates CJK characters, else ``None``
    (cached: one per process and tokenizer, like :func:`encoding_backend`)."""
    spec = json.loads(tokenizer_json)
    normalizer, pre_tokenizer, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec.get("model")
    if (normalizer.get("type") != "BertNormalizer" or not normalizer.get("handle_chinese_chars")
            or pre_tokenizer.get("type") != "BertPreTokenizer" or (model or {}).get("type") != "WordPiece"):
        return None
    return FastBertEncoder(tokenizer_json)


def encode_flat(texts: list[str], tokenizer_json: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` end to end (no special tokens) and each text's count: BERT-shaped
    tokenizers that isolate CJK characters vectorised (:func:`fast_encoder`: the same ids), others by
    ``tokenizers`` (:func:`library_encode`). The token store and an extra corpus encode alike."""
    fast = fast_encoder(tokenizer_json)
    ids, _, per_text = (fast.encode_flat(texts) if fast is not None
                        else library_encode(encoding_backend(tokenizer_json), texts))
    return ids, per_text


class SingleCharacterFilter:
    """Training text for a WordPiece trainer without its single characters (the CJK and punctuation
    characters BERT's normaliser and pre-tokenizer make words of their own): they are never merged,
    so they matter to training only as alphabet, which :func:`~bert_mlm.core.tokens.tokenizer.train_wordpiece`
    gives the trainer itself. On Chinese text the trainer then reads a tenth of the characters, with
    the same vocabulary (a test trains both ways)."""

    def __init__(self, normalizer, pre_tokenizer):
        self.normalizer, self.pre_tokenizer = normalizer, pre_tokenizer
        self.classes = character_classes()
        self.single = np.full(0x110000, -1, dtype=np.int8)  # -1 not asked yet, 1 single, 0 not

    def _learn(self, codes: np.ndarray) -> None:
        for code in _distinct(codes[self.single[codes] < 0]).tolist():
            character = self.normalizer.normalize_str(chr(code)).strip()  # CJK comes back padded with spaces
            pieces = [piece for piece, _ in self.pre_tokenizer.pre_tokenize_str(
                self.normalizer.normalize_str(f"a{chr(code)}a"))]
            self.single[code] = len(character) == 1 and pieces == ["a", character, "a"]

    def __call__(self, texts: list[str]) -> list[str]:
        if not texts:
            return texts
        codes = np.frombuffer("\n".join(texts).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        candidates = self.classes[codes] == SINGLE
        if candidates.sum() < MIN_SINGLE_SHARE * len(codes):
            return texts
        self._learn(codes[candidates])
        codes[candidates & (self.single[codes] == 1)] = 32  # a space: the runs around stay apart
        return [" ".join(codes.astype(np.uint32).tobytes().decode("utf-32-le").split())]
