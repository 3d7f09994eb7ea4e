"""WordPiece tokenizers: train with HF ``tokenizers``, or load an existing vocabulary.

The result is always a ``transformers.BertTokenizerFast`` built around a ``tokenizers.Tokenizer``
object (never ``BertTokenizerFast(vocab_file=...)``, which in transformers 5 can silently load
only the special tokens), with ``[PAD]`` at id 0 and ``[CLS] $A [SEP]`` post-processing.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

if TYPE_CHECKING:  # transformers imports torch (~3 s): not in the data stages' worker processes
    from transformers import BertTokenizerFast, PreTrainedTokenizerFast

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.common.text import cjk_characters
from bert_mlm.core.data.corpus import in_pieces
from bert_mlm.core.tokens.cjk_encoding import SingleCharacterFilter, encode_flat, is_chinese, is_punctuation
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
CJK_MAJORITY = 0.5  # "mostly CJK": a share of the letters (accent stripping, masking.word_segmenter: auto)


def _characters(*ranges: tuple[int, int]) -> str:
    return "".join(chr(code) for low, high in ranges for code in range(low, high + 1))


# Characters every trained vocabulary holds, however rare in the training text (BERT's own
# vocabularies hold them all): a Gutenberg vocabulary without them gave 1.2 % [UNK] on WikiText,
# mostly "=" (once in the books), dashes, curly quotes, "+", "°" and currency signs.
BASE_ALPHABET = (
    _characters((0x21, 0x7E))  # printable ASCII
    + "\u2010\u2011\u2012\u2013\u2014\u2015\u2018\u2019\u201a\u201c\u201d\u201e\u2026\u2020\u2021\u2022\u2030"
    "\u2032\u2033\u2039\u203a\u00ab\u00bb\u00a1\u00bf\u00a7\u00b6\u00b7\u00b0\u00b1\u00d7\u00f7\u00a9\u00ae\u2122"
    "\u00bc\u00bd\u00be\u00b9\u00b2\u00b3\u00b5"  # dashes, quotes, ellipsis, marks, degree, signs
    + "\u00a2\u00a3\u00a5\u20ac\u20a9\u20b9\u20bd\u20ba\u20a3\u20a4"  # currency
    # CJK and full-width punctuation: 、。〃 〈〉《》「」『』【】 〔〕〖〗〘〙〚〛〜〝〞〟
    # ！＂＃…／ ：；＜＝＞？＠ ［＼］＾＿｀ ｛｜｝～｟｠｡｢｣､
    + _characters((0x3001, 0x3003), (0x3008, 0x3011), (0x3014, 0x301F), (0xFF01, 0xFF0F), (0xFF1A, 0xFF20),
                  (0xFF3B, 0xFF40), (0xFF5B, 0xFF64), (0xFFE0, 0xFFE6))  # and ￠￡￢￣￤￥￦
)


class VocabularyError(UserError):
    """A vocabulary or tokenizer that the project cannot use."""


def bert_tokenizer(vocab: dict[str, int], lowercase: bool, strip_accents: bool | None,
                   chinese_chars: bool) -> BertTokenizerFast:
    """A WordPiece ``vocab`` with BERT's normaliser (one token per CJK character with
    ``chinese_chars``), pre-tokenizer, decoder and ``[CLS] $A [SEP]`` post-processing."""
    tokenizer = _backend(WordPiece(vocab=vocab, unk_token=UNK), lowercase, strip_accents, chinese_chars)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, tokenizer.token_to_id(CLS)), (SEP, tokenizer.token_to_id(SEP))])
    return wrap_tokenizer(tokenizer, lowercase, strip_accents, chinese_chars)


def _backend(model: WordPiece, lowercase: bool, strip_accents: bool | None, chinese_chars: bool) -> Tokenizer:
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=chinese_chars,
                                                      strip_accents=strip_accents, lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


def wrap_tokenizer(tokenizer: Tokenizer, lowercase: bool, strip_accents: bool | None,
                   chinese_chars: bool) -> BertTokenizerFast:
    from transformers import BertTokenizerFast

    # tokenize_chinese_chars is saved in tokenizer_config.json; AutoTokenizer rebuilds from it.
    wrapped = BertTokenizerFast(tokenizer_object=tokenizer, unk_token=UNK, sep_token=SEP, pad_token=PAD,
                                cls_token=CLS, mask_token=MASK, do_lower_case=lowercase, strip_accents=strip_accents,
                                tokenize_chinese_chars=chinese_chars)
    check_tokenizer(wrapped)
    return wrapped


def _batches(texts: Iterable[str] | Iterable[list[str]], size: int = 1000):
    """Lists of texts: the lists given, or the strings given grouped ``size`` at a time."""
    for strings, run in itertools.groupby(texts, key=lambda item: isinstance(item, str)):
        yield from in_pieces(run, size, lambda _: 1) if strings else run  # noqa: B031 - one use either way


def raw_character_counts(texts: Iterable[str] | Iterable[list[str]]) -> Counter:
    """How often each character occurs (a batch's code points counted at once: ~10x Counter.update)."""
    counts = np.zeros(0x110000, dtype=np.int64)
    for batch in _batches(texts):
        codes = np.frombuffer("".join(batch).encode("utf-32-le"), dtype=np.uint32)
        if len(codes):
            found = np.bincount(codes)
            counts[: len(found)] += found
    present = np.flatnonzero(counts)
    return Counter({chr(code): int(counts[code]) for code in present.tolist()})


def mostly_cjk(counts: Counter) -> bool:
    """Whether most letters are CJK (the rule ``masking.word_segmenter: auto`` follows)."""
    cjk = sum(count for character, count in counts.items() if cjk_characters(character))
    letters = sum(count for character, count in counts.items() if character.isalpha())
    return cjk > CJK_MAJORITY * letters


def resolve_strip_accents(strip_accents: bool | None, lowercase: bool, counts: Counter) -> bool:
    """``None``: strip accents when lowercasing (BERT uncased), except where CJK text dominates:
    stripping decomposes kana and drops their voicing marks (が -> か, で -> て: 92 of 110
    Japanese lines changed on a round trip)."""
    if strip_accents is not None:
        return strip_accents
    if lowercase and mostly_cjk(counts):
        logger.info("tokenizer.strip_accents: off, the training text is mostly CJK (stripping turns が into か)")
        return False
    return lowercase


def base_alphabet(setting: str | None) -> str:
    """The characters of ``tokenizer.base_alphabet``: "default", "none"/null, or the characters."""
    if setting is None or setting == "none":
        return ""
    return BASE_ALPHABET if setting == "default" else setting


def train_wordpiece(texts: Iterable[str] | Iterable[list[str]] | Callable[[], Iterable],
                    config: TokenizerConfig) -> BertTokenizerFast:
    """Train a BERT-style WordPiece vocabulary as ``config`` (the ``tokenizer`` section) describes
    it, on ``texts`` (strings, or batches of strings: streamed, so the corpus need not fit in
    memory).

    The initial alphabet holds every character that occurs ``min_frequency`` times, unless
    ``limit_alphabet`` caps it: ``tokenizers``' own default cap of 1,000 characters loses most
    of a Chinese corpus (10 % unknown tokens on four classical novels). Counting the alphabet
    takes a first pass over ``texts``, so a stream must be given as a callable that starts it
    anew (a list is read twice as it is). The characters of ``base_alphabet`` (see
    :func:`base_alphabet`) are always kept, on top of that cap, with their ``##`` forms.
    """
    stream = texts if callable(texts) else (lambda: texts)
    if not callable(texts) and not isinstance(texts, (list, tuple)) and config.limit_alphabet is None:
        raise TypeError("train_wordpiece: give a list or a callable that yields the texts (the alphabet: two passes)")
    raw_counts = raw_character_counts(stream())
    # Resolved here and saved with the tokenizer (tokenizer_config.json), which rebuilds its
    # normaliser from it when loaded.
    normalisation = (config.lowercase, resolve_strip_accents(config.strip_accents, config.lowercase, raw_counts),
                     config.chinese_chars)
    tokenizer = _backend(WordPiece(unk_token=UNK), *normalisation)
    alphabet = _Alphabet.of(raw_counts, tokenizer.normalizer, config)
    # The characters BERT makes words of their own (CJK, punctuation) are never merged: the trainer
    # gets them as its initial alphabet (exactly those it would keep by their counts, counted above)
    # and reads the text without them (a tenth of a Chinese corpus; the same vocabulary).
    without_singles = SingleCharacterFilter(tokenizer.normalizer, tokenizer.pre_tokenizer)
    trainer = WordPieceTrainer(
        vocab_size=config.vocab_size, min_frequency=config.min_frequency, continuing_subword_prefix="##",
        special_tokens=[*SPECIAL_TOKENS, *alphabet.reserved(config.chinese_chars)],  # in this order: [PAD] gets id 0
        # The initial alphabet counts against the cap (it is kept first): the cap grows by it.
        limit_alphabet=alphabet.limit + len(alphabet.added), show_progress=False,
        initial_alphabet=sorted({*alphabet.base, *alphabet.kept}) if alphabet.counted else alphabet.base)
    batches = (without_singles(batch) for batch in _batches(stream())) if alphabet.counted else _batches(stream())
    tokenizer.train_from_iterator(batches, trainer=trainer)
    # Renumbered (special tokens first, then by string): the token ids, and so everything
    # downstream, are a function of the corpus alone. The reserved pieces become plain tokens.
    trained = tokenizer.get_vocab()
    ordered = list(SPECIAL_TOKENS) + sorted(t for t in trained if t not in SPECIAL_TOKENS)
    _warn_about_size(len(ordered), config, alphabet)
    return bert_tokenizer({t: i for i, t in enumerate(ordered)}, *normalisation)


@dataclass(frozen=True)
class _Alphabet:
    """The characters a trained vocabulary starts from, as the tokenizer sees them (lowercased,
    accents stripped: "A" is "a" in an uncased vocabulary)."""

    kept: list[str]  # the frequent characters, up to the cap
    added: list[str]  # base-alphabet characters beyond them
    base: list[str]  # the whole base alphabet
    limit: int  # the cap: tokenizer.limit_alphabet, or every frequent character
    counted: bool  # whether the cap was counted (no tokenizer.limit_alphabet)

    @classmethod
    def of(cls, raw_counts: Counter, normalizer, config: TokenizerConfig) -> _Alphabet:
        counts: Counter = Counter()  # as the tokenizer sees the characters (lowercased, accents stripped)
        for character, count in raw_counts.items():
            for piece in normalizer.normalize_str(character):
                if not piece.isspace():
                    counts[piece] += count
        frequent = sorted((c for c, n in counts.items() if n >= config.min_frequency), key=lambda c: (-counts[c], c))
        counted = config.limit_alphabet is None
        limit = len(frequent) if counted else config.limit_alphabet
        base = sorted({c for character in base_alphabet(config.base_alphabet)
                       for c in normalizer.normalize_str(character) if not c.isspace()})
        kept = frequent[:limit]
        return cls(kept, sorted(set(base) - set(kept)), base, limit, counted)

    def reserved(self, chinese_chars: bool) -> list[str]:
        """Every "##c" piece, handed to the trainer up front as a reserved token. The trainer
        creates each when it first meets it while iterating a hash map, and breaks ties between
        equally frequent pairs by those ids: the same corpus gave a different vocabulary from run
        to run (huggingface/tokenizers#1794; 3 runs of the default chain, 3 vocabularies). Reserved,
        they get fixed ids (and the base alphabet gets its "##" forms, which its initial_alphabet
        does not create). Only characters that can continue a word: not punctuation, nor a CJK
        character when those are split off one by one."""
        return sorted(f"##{c}" for c in [*self.kept, *self.added]
                      if not c.isspace() and not is_punctuation(c) and not (chinese_chars and is_chinese(c)))


def _warn_about_size(size: int, config: TokenizerConfig, alphabet: _Alphabet) -> None:
    """Say why a trained vocabulary missed ``tokenizer.vocab_size``, and what changes it."""
    if size < config.vocab_size:
        source = (f"its {alphabet.limit} characters that occur at least tokenizer.min_frequency={config.min_frequency} "
                  "times" if alphabet.counted else f"tokenizer.limit_alphabet={alphabet.limit} characters")
        logger.warning("tokenizer.vocab_size: the vocabulary has %d tokens, fewer than the %d asked for: the training "
                       "text gives %s, and no further pair of pieces occurs that often (CJK characters are never "
                       "merged). More text, or a lower tokenizer.min_frequency, gives more.", size, config.vocab_size,
                       source)
    elif size > config.vocab_size:
        logger.warning("tokenizer.vocab_size: the vocabulary has %d tokens, more than the %d asked for: every "
                       "character of the training text's alphabet (and its ## continuation) is kept, so that no text "
                       "becomes [UNK]. Raise tokenizer.vocab_size, or lower tokenizer.limit_alphabet to cap the "
                       "alphabet.", size, config.vocab_size)


def read_vocab_file(path: str | os.PathLike) -> dict[str, int]:
    """Read a ``vocab.txt`` (one token per line, id = line number) and validate it."""
    file = Path(path)
    if not file.is_file():
        raise VocabularyError(f"tokenizer.vocab_path: {str(file)!r} is not a file")
    # split("\n"), not splitlines(): vocabularies hold tokens such as U+2028 or U+0085 that
    # splitlines() treats as line breaks (bert-base-chinese does).
    tokens = [token.rstrip("\r") for token in file.read_text(encoding="utf-8").removesuffix("\n").split("\n")]
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    duplicates = [token for index, token in enumerate(tokens) if vocab[token] != index]
    if duplicates:
        raise VocabularyError(f"tokenizer.vocab_path: {str(file)!r} has {len(duplicates)} duplicate token(s), "
                              f"e.g. {duplicates[:5]}")
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise VocabularyError(f"tokenizer.vocab_path: {str(file)!r} lacks the special token(s) {missing}")
    if vocab[PAD] != 0:
        raise VocabularyError(f"tokenizer.vocab_path: {PAD} must be id 0 in {str(file)!r} (it is {vocab[PAD]})")
    return vocab


def load_tokenizer(path: str | os.PathLike, lowercase: bool = True, strip_accents: bool | None = None,
                   chinese_chars: bool = True) -> PreTrainedTokenizerFast:
    """Load an existing vocabulary: a ``vocab.txt`` file or a tokenizer directory."""
    location = Path(path)
    if location.is_dir():
        if (location / "tokenizer.json").is_file() or (location / "tokenizer_config.json").is_file():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(location))
            check_tokenizer(tokenizer)
            return tokenizer
        if not (location / "vocab.txt").is_file():
            raise VocabularyError(f"tokenizer.vocab_path: directory {str(location)!r} has neither a tokenizer.json "
                                  "nor a vocab.txt")
        location = location / "vocab.txt"
    return bert_tokenizer(read_vocab_file(location), lowercase, strip_accents, chinese_chars)


def check_tokenizer(tokenizer: PreTrainedTokenizerFast) -> None:
    """Refuse tokenizers that would silently break training."""
    for name in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"):
        if getattr(tokenizer, name) is None:
            raise VocabularyError(f"tokenizer: {name} is not set")
    if tokenizer.pad_token_id != 0:
        raise VocabularyError(f"tokenizer: [PAD] must be id 0, it is {tokenizer.pad_token_id}")
    if len(tokenizer) <= len(SPECIAL_TOKENS):
        raise VocabularyError(f"tokenizer: the vocabulary holds only {len(tokenizer)} tokens; it was probably loaded "
                              "without its vocab (only special tokens)")
    probe = tokenizer("a")["input_ids"]
    if probe[0] != tokenizer.cls_token_id or probe[-1] != tokenizer.sep_token_id:
        raise VocabularyError("tokenizer: encodings do not start with [CLS] and end with [SEP]")


def encode_documents(tokenizer: PreTrainedTokenizerFast, texts: Sequence[str]) -> list[np.ndarray]:
    """Token ids of each document, without special tokens, as int32 arrays: encoded as the token store
    encodes (:func:`~bert_mlm.core.tokens.cjk_encoding.encode_flat`) rather than by ``tokenizer(texts)``,
    which builds Python lists of every field (measured in BENCHMARKS.md)."""
    ids, per_text = encode_flat(list(texts), tokenizer.backend_tokenizer.to_str())
    return np.split(ids.astype(np.int32), np.cumsum(per_text)[:-1]) if len(texts) else []


def special_token_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
    return sorted(set(tokenizer.all_special_ids))
