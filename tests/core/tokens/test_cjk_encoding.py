"""The vectorised BERT encoding of CJK text gives the token ids and offsets of ``tokenizers``
itself: both Chinese corpora, English, and random text from all of Unicode, on a Chinese and an
English (accent-stripping) vocabulary."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from bert_mlm.core.tokens import cjk_encoding
from bert_mlm.core.tokens.cjk_encoding import encoding_backend, fast_encoder
from bert_mlm.core.tokens.tokenizer import TokenizerConfig, load_tokenizer, train_wordpiece


def _random_texts(count: int, seed: int) -> list[str]:
    """Texts mixing printable and rare characters, CJK, every plane, white space, combining marks,
    zero-width and control characters; and added tokens' text."""
    rng = random.Random(seed)
    draws = [lambda: rng.randint(32, 0x2FFF), lambda: rng.randint(0x4E00, 0x9FFF), lambda: rng.randint(0, 0x10FFFF),
             lambda: rng.choice([0x3000, 0x200B, 0x301, 10, 32, 9, 0xA0, 0x85, 0xB, 0, 0xFFFD, 0x2E4B])]
    texts = ["".join(chr(rng.choice(draws)()) for _ in range(rng.randint(0, 80))) for _ in range(count)]
    texts = ["".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF) for text in texts]
    return texts + ["好[MASK]的", "a[UNK]b", "", " ", "ÄBC 中文 abc-def don't", "x" * 150 + "中", "24-26楼，xxx.com"]


def _assert_same(tokenizer, texts: list[str]) -> None:
    serialised = tokenizer.backend_tokenizer.to_str()
    library = encoding_backend(serialised)
    fast = fast_encoder(serialised)
    for offsets in (False, True):
        ids, starts, per_text = fast.encode_flat(texts, offsets=offsets)
        reference = (library.encode_batch if offsets else library.encode_batch_fast)(texts, add_special_tokens=False)
        ends = per_text.cumsum()
        for text, end, count, expected in zip(texts, ends, per_text, reference, strict=True):
            assert ids[end - count:end].tolist() == expected.ids, text
            if offsets:
                assert starts[end - count:end].tolist() == [start for start, _ in expected.offsets], text


@pytest.fixture(scope="module")
def chinese(shared_dir):
    return load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")


def test_both_chinese_corpora_encode_as_the_library_does(chinese, shared_dir):
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"]
    news = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
    _assert_same(chinese, reviews.dropna().astype(str).tolist()[::5])
    _assert_same(chinese, news[::20])


@pytest.mark.parametrize("vocabulary", ["bert-base-chinese", "bert-base-uncased"])
def test_random_unicode_encodes_as_the_library_does(shared_dir, vocabulary, monkeypatch):
    monkeypatch.setattr(cjk_encoding, "MIN_SINGLE_SHARE", 0.0)  # the vectorised path for every batch
    tokenizer = load_tokenizer(shared_dir / "vocab" / f"{vocabulary}.vocab.txt")
    _assert_same(tokenizer, _random_texts(3000, seed=len(vocabulary)))


def test_a_trained_vocabulary_and_english_text(shared_dir):
    book = (shared_dir / "corpora" / "gutenberg" / "austen-emma.txt").read_text(encoding="utf-8").split("\n\n")
    tokenizer = train_wordpiece(book[:800], TokenizerConfig(vocab_size=600))
    _assert_same(tokenizer, book[800:1200] + ["房间很干净, the room was clean."] * 3)


def test_only_bert_shaped_tokenizers_that_isolate_cjk_characters(shared_dir):
    tokenizer = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt", chinese_chars=False)
    assert fast_encoder(tokenizer.backend_tokenizer.to_str()) is None


@pytest.mark.parametrize("corpus", ["reviews", "news+english"])
def test_the_trainer_reading_text_without_single_characters_learns_the_same_vocabulary(shared_dir, corpus,
                                                                                        monkeypatch):
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"]
    texts = reviews.dropna().astype(str).tolist()[:4000]
    if corpus != "reviews":
        news = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()[:6000]
        book = (shared_dir / "corpora" / "gutenberg" / "austen-emma.txt").read_text(encoding="utf-8").split("\n\n")
        texts = news + book[:600]
    config = TokenizerConfig(vocab_size=4000)
    filtered = train_wordpiece(texts, config).get_vocab()
    monkeypatch.setattr(cjk_encoding, "MIN_SINGLE_SHARE", 2.0)  # the trainer reads every character
    assert train_wordpiece(texts, config).get_vocab() == filtered
