"""The coverage of an inherited vocabulary on the training text, and its extension.

Continued pretraining inherits the starting model's WordPiece vocabulary. Where the domain text
holds characters that vocabulary lacks, WordPiece turns each word containing one into ``[UNK]``
(the whole word: BERT's WordPiece has no character fallback), and the model never sees them.
:func:`measure_coverage` counts that; :func:`extension_tokens` picks the domain's most frequent
missing tokens; :func:`extend_tokenizer` appends them to the vocabulary (every inherited id keeps
its token, so the result *extends* the starting vocabulary); :func:`grow_embeddings` gives the
model rows for them, each initialised from the rows of the pieces its text was split into.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from tokenizers import Tokenizer, normalizers
from tokenizers.models import WordPiece
from transformers import BertTokenizerFast, PreTrainedModel, PreTrainedTokenizerBase

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.tokens.cjk_encoding import encoding_backend, flat_ids
from bert_mlm.core.tokens.tokenizer import (
    UNK,
    VocabularyError,
    mostly_cjk,
    raw_character_counts,
    train_wordpiece,
    wrap_tokenizer,
)

logger = logging.getLogger(__name__)

SHOWN = 10  # uncovered characters and words named in the log and the report


@dataclass
class Coverage:
    """How a vocabulary covers a text: its tokens, the ``[UNK]`` among them, the words that
    became ``[UNK]`` (normalised, as the tokenizer sees them) and the vocabulary forms they lack
    (``c`` where the character starts a word, ``##c`` where it continues one)."""

    tokens: int = 0
    unknown: int = 0
    words: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    def commonest(self, counts: Counter) -> str:
        return ", ".join(f"{token!r} x{n:,}" for token, n in counts.most_common(SHOWN)) or "none"


def measure_coverage(tokenizer: PreTrainedTokenizerBase, texts: Iterable[list[str]]) -> Coverage:
    """Count the ``[UNK]`` tokens of ``texts`` (batches of documents) under ``tokenizer``, and what
    they were. Documents without one cost one fast encoding (ids only); only those with one are
    encoded again with character offsets, to read the words back."""
    backend = encoding_backend(tokenizer.backend_tokenizer.to_str())
    vocab, unk = tokenizer.get_vocab(), tokenizer.unk_token_id
    normalizer = backend.normalizer
    coverage = Coverage()
    for batch in texts:
        ids, per_text = flat_ids(backend.encode_batch_fast(batch, add_special_tokens=False))
        unknown = ids == unk
        coverage.tokens += len(ids)
        coverage.unknown += int(unknown.sum())
        per_text_unknown = np.bincount(np.repeat(np.arange(len(batch)), per_text)[unknown], minlength=len(batch))
        flagged = [text for text, found in zip(batch, per_text_unknown.tolist(), strict=True) if found]
        for text, encoding in zip(flagged, backend.encode_batch(flagged, add_special_tokens=False), strict=True):
            for token_id, (start, end) in zip(encoding.ids, encoding.offsets, strict=True):
                if token_id == unk:
                    word = normalizer.normalize_str(text[start:end]) if normalizer else text[start:end]
                    # One pre-tokenized word; BERT's normaliser pads a CJK character with spaces.
                    coverage.words["".join(word.split())] += 1
    for word, count in coverage.words.items():
        for form in missing_forms(word, vocab):
            coverage.missing[form] += count
    return coverage


def missing_forms(word: str, vocab: Mapping[str, int]) -> list[str]:
    """The vocabulary forms a word needs and ``vocab`` lacks: its first character as itself, the
    others as ``##`` continuations (a word longer than WordPiece's limit lacks none: it is
    ``[UNK]`` by length)."""
    forms = [word[0]] + [f"##{c}" for c in word[1:]] if word else []
    return list(dict.fromkeys(form for form in forms if form not in vocab))


def wordpiece_ids(text: str, vocab: Mapping[str, int], unk_id: int, continuation: bool = False,
                  prefix: str = "##", max_chars: int = 100) -> list[int]:
    """Greedy longest-match-first WordPiece of one word, BERT's algorithm: the ids of its pieces,
    or ``[unk_id]`` when some part matches no piece. Written here because ``tokenizers`` can
    tokenize a word only from its start, never a ``##`` continuation such as a new piece
    ``##tel``; tests/core/test_vocabulary.py checks it against the library on whole words."""
    if len(text) > max_chars:
        return [unk_id]
    ids, start = [], 0
    while start < len(text):
        for end in range(len(text), start, -1):
            piece = text[start:end] if start == 0 and not continuation else prefix + text[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                start = end
                break
        else:
            return [unk_id]
    return ids


def inherited_normalisation(tokenizer: PreTrainedTokenizerBase, config: TokenizerConfig) -> tuple[bool, bool, bool]:
    """(lowercase, strip_accents, chinese_chars) of an inherited tokenizer: what its BERT
    normaliser does (the ``tokenizer`` section's values where it has another normaliser)."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    if isinstance(normalizer, normalizers.BertNormalizer):
        lowercase = normalizer.lowercase
        strip = normalizer.strip_accents
        return lowercase, lowercase if strip is None else strip, normalizer.handle_chinese_chars
    strip = config.lowercase if config.strip_accents is None else config.strip_accents
    return config.lowercase, strip, config.chinese_chars


def domain_pieces(texts: Callable[[], Iterable[list[str]]], tokenizer: PreTrainedTokenizerBase,
                  config: TokenizerConfig) -> Counter:
    """WordPiece pieces learned on the domain text (as many as the inherited vocabulary holds,
    normalised as it normalises) that the inherited vocabulary lacks, with how often the domain's
    own tokenizer uses each on that text."""
    lowercase, strip, chinese = inherited_normalisation(tokenizer, config)
    domain_config = config.replace(vocab_size=len(tokenizer), lowercase=lowercase, strip_accents=strip,
                                   chinese_chars=chinese, base_alphabet="none", vocab_path=None)
    domain = train_wordpiece(texts, domain_config)
    counts = np.zeros(len(domain), dtype=np.int64)
    backend = encoding_backend(domain.backend_tokenizer.to_str())
    for batch in texts():
        counts += np.bincount(flat_ids(backend.encode_batch_fast(batch, add_special_tokens=False))[0],
                              minlength=len(counts))
    inherited, special = tokenizer.get_vocab(), set(domain.all_special_tokens)
    return Counter({piece: int(counts[index]) for piece, index in domain.get_vocab().items()
                    if piece not in inherited and piece not in special and counts[index] > 0})


def extension_tokens(coverage: Coverage, limit: int, chinese: bool,
                     pieces: Callable[[], Counter] | None = None) -> list[str]:
    """Up to ``limit`` tokens to add, most useful first: the forms whose absence made words
    ``[UNK]`` (by how many tokens they cost), then, on text that is not mostly CJK, the domain's
    WordPiece pieces the vocabulary lacks (by frequency). On Chinese text only characters are
    added: its words are characters already, and the missing ones are what costs coverage."""
    ranked = sorted(coverage.missing.items(), key=lambda item: (-item[1], item[0]))
    chosen = [form for form, _ in ranked][:limit]
    if len(chosen) < limit and not chinese and pieces is not None:
        taken = set(chosen)
        extra = sorted(((piece, n) for piece, n in pieces().items() if piece not in taken),
                       key=lambda item: (-item[1], item[0]))
        chosen += [piece for piece, _ in extra][: limit - len(chosen)]
    return chosen


def extend_tokenizer(tokenizer: PreTrainedTokenizerBase, tokens: Sequence[str],
                     config: TokenizerConfig) -> BertTokenizerFast:
    """``tokenizer`` with ``tokens`` appended to its WordPiece vocabulary (ids ``len(tokenizer)``
    onwards, in order); every inherited token keeps its id, and the normaliser, pre-tokenizer and
    post-processor are the inherited ones. Saved, it is a plain BERT tokenizer (``tokenizer.json``
    and ``vocab.txt``)."""
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    model = backend.model
    if not isinstance(model, WordPiece):
        raise VocabularyError(f"tokenizer.extend_vocabulary: the inherited tokenizer is a {type(model).__name__}, not "
                              "a WordPiece vocabulary; only WordPiece vocabularies (BERT's) are extended")
    vocab = dict(sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]))
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise VocabularyError("tokenizer.extend_vocabulary: the inherited vocabulary's ids are not 0..n-1")
    for token in tokens:
        if token in vocab:
            raise ValueError(f"extend_tokenizer: {token!r} is in the vocabulary already")
        vocab[token] = len(vocab)
    backend.model = WordPiece(vocab=vocab, unk_token=model.unk_token,
                              max_input_chars_per_word=model.max_input_chars_per_word,
                              continuing_subword_prefix=model.continuing_subword_prefix)
    lowercase, strip, chinese = inherited_normalisation(tokenizer, config)
    return wrap_tokenizer(backend, lowercase, strip, chinese)


def grow_embeddings(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Give ``model`` (whose vocabulary is the first ``model.config.vocab_size`` ids of
    ``tokenizer``) a row for every token of ``tokenizer`` beyond it, in place. Each new word
    embedding is the mean of the embeddings of the pieces its text splits into under the old
    vocabulary, or the mean of all old embeddings where it splits into ``[UNK]``; the output
    decoder (tied to the word embeddings in ``BertForMaskedLM``) follows, and each new decoder bias
    is the mean of the same pieces' biases (all old biases for ``[UNK]``). No random draw: the
    grown model is a function of the checkpoint and the tokenizer. Returns the new ids."""
    old_size, new_size = model.config.vocab_size, len(tokenizer)
    if new_size <= old_size:
        return []
    vocab = tokenizer.get_vocab()
    old_vocab = {token: index for token, index in vocab.items() if index < old_size}
    unk = vocab[UNK]
    added = sorted((index, token) for token, index in vocab.items() if index >= old_size)
    with torch.random.fork_rng(devices=[]):  # resizing draws the new rows we overwrite: keep the caller's RNG
        model.resize_token_embeddings(new_size, mean_resizing=False)
    pieces = {}
    for index, token in added:
        continuation = token.startswith("##") and len(token) > 2
        split = wordpiece_ids(token[2:] if continuation else token, old_vocab, unk, continuation)
        pieces[index] = None if split == [unk] else torch.tensor(split)
    embeddings = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    grown = [embeddings]
    if output is not None and output.weight is not embeddings:  # an untied head: its own rows, the same rule
        grown.append(output.weight)
    if getattr(output, "bias", None) is not None:
        grown.append(output.bias)
    with torch.no_grad():
        for parameter in grown:
            mean = parameter[:old_size].mean(dim=0)
            for index, rows in pieces.items():
                parameter[index] = mean if rows is None else parameter[rows].mean(dim=0)
    return [index for index, _ in added]


@dataclass
class VocabularyReport:
    """What the tokenization stage found and did about an inherited vocabulary (the
    ``vocabulary_coverage`` output: the log's numbers, for the report)."""

    source: str
    inherited_tokens: int
    measured_tokens: int
    sample_fraction: float | None
    unknown_rate: float
    unknown_tokens: int
    uncovered_words: list
    uncovered_characters: list
    warning_rate: float
    added_tokens: int = 0
    added: list = field(default_factory=list)
    unknown_rate_after: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def adapt_vocabulary(tokenizer: PreTrainedTokenizerBase, texts: Callable[[], Iterable[list[str]]],
                     config: TokenizerConfig, source: str, sample_fraction: float | None = None,
                     ) -> tuple[PreTrainedTokenizerBase, VocabularyReport]:
    """Measure the inherited vocabulary's ``[UNK]`` rate on ``texts`` (the train split, or its
    sample), warn above ``tokenizer.unk_warning_rate`` naming what is missing and the remedy, and
    with ``tokenizer.extend_vocabulary`` > 0 extend it by the domain's commonest missing tokens."""
    coverage = measure_coverage(tokenizer, texts())
    warn = coverage.rate > config.unk_warning_rate and not config.extend_vocabulary
    # Another pass over the text, only where its language decides something.
    chinese = bool(coverage.tokens) and (warn or config.extend_vocabulary) and mostly_cjk(raw_character_counts(texts()))
    report = VocabularyReport(source=source, inherited_tokens=len(tokenizer), measured_tokens=coverage.tokens,
                              sample_fraction=sample_fraction, unknown_rate=coverage.rate,
                              unknown_tokens=coverage.unknown,
                              uncovered_words=[[w, n] for w, n in coverage.words.most_common(SHOWN)],
                              uncovered_characters=[[c, n] for c, n in coverage.missing.most_common(SHOWN)],
                              warning_rate=config.unk_warning_rate)
    sample = f" (a {sample_fraction:.1%} sample of the train split)" if sample_fraction else ""
    logger.info("The vocabulary of %s (%d tokens) turns %.4f%% of the training text's %d tokens%s into %s",
                source, len(tokenizer), 100 * coverage.rate, coverage.tokens, sample, UNK)
    if warn:
        words = "" if chinese else f"; words: {coverage.commonest(coverage.words)}"
        logger.warning("tokenizer: the inherited vocabulary of %s turns %.2f%% of the training text's tokens into %s "
                       "(%s of %s), above tokenizer.unk_warning_rate=%.2f%%; the model never sees that text. Commonest "
                       "missing: %s (%d distinct)%s. Set tokenizer.extend_vocabulary=%d to add them to the vocabulary "
                       "(each new embedding starts from the mean of the pieces it was split into), or start from a "
                       "model whose vocabulary covers this text.", source, 100 * coverage.rate, UNK,
                       f"{coverage.unknown:,}", f"{coverage.tokens:,}", 100 * config.unk_warning_rate,
                       coverage.commonest(coverage.missing), len(coverage.missing), words,
                       max(len(coverage.missing), 1))
    if not config.extend_vocabulary:
        return tokenizer, report
    tokens = extension_tokens(coverage, config.extend_vocabulary, chinese,
                              lambda: domain_pieces(texts, tokenizer, config))
    if not tokens:
        logger.info("tokenizer.extend_vocabulary=%d: the training text needs no token the vocabulary lacks",
                    config.extend_vocabulary)
        return tokenizer, report
    extended = extend_tokenizer(tokenizer, tokens, config)
    after = measure_coverage(extended, texts())
    report.added_tokens, report.added, report.unknown_rate_after = len(tokens), tokens, after.rate
    kind = "characters" if chinese else "characters and WordPiece pieces learned on the training text"
    logger.info("tokenizer.extend_vocabulary=%d: added %d %s (%s%s); %s rate %.4f%% -> %.4f%%",
                config.extend_vocabulary, len(tokens), kind, ", ".join(repr(t) for t in tokens[:SHOWN]),
                ", ..." if len(tokens) > SHOWN else "", UNK, 100 * coverage.rate, 100 * after.rate)
    return extended, report

