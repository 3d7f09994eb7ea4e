"""WordPiece training and loading, on real text and the original BERT vocabularies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from transformers import AutoTokenizer

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.data.corpus import split_paragraphs
from bert_mlm.core.tokens.tokenizer import (
    SPECIAL_TOKENS,
    VocabularyError,
    encode_documents,
    load_tokenizer,
    read_vocab_file,
    special_token_ids,
    train_wordpiece,
)
from bert_mlm.errors import UserError
from tests.core.conftest import synthetic_sentences

TRAIN_BOOKS = ("austen-emma.txt", "chesterton-brown.txt")  # ~1.3 MB together
HELD_OUT_BOOK = "melville-moby_dick.txt"


def unknown_token_rate(tokenizer, texts) -> float:
    """Share of [UNK] among the tokens of ``texts`` (the guide's check: a vocabulary that loaded
    only its special tokens turns every word into [UNK])."""
    ids = encode_documents(tokenizer, texts)
    total = sum(len(a) for a in ids)
    unknown = sum(int((a == tokenizer.unk_token_id).sum()) for a in ids)
    return unknown / total if total else 0.0
SAMPLES = [
    "Emma Woodhouse, handsome, clever, and rich, had lived nearly twenty-one years.",
    "Father Brown laid down his cigar and said: 'It's a curious case!'",
    "Call me Ishmael. Some years ago -- never mind how long precisely.",
    "The caf\u00e9's na\u00efve r\u00e9sum\u00e9, 1,234 items; [MASK] of them.",
    "",
]


def _paragraphs(path):
    return split_paragraphs(path.read_text(encoding="utf-8"))


def _wikitext_lines(shared_dir):
    text = (shared_dir / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8")
    return [line.strip() for line in text.split("\n") if line.strip()]


@pytest.fixture(scope="module")
def trained(shared_dir):
    texts = []
    for name in TRAIN_BOOKS:
        texts += _paragraphs(shared_dir / "corpora" / "gutenberg" / name)
    return train_wordpiece(texts, TokenizerConfig(vocab_size=8000, base_alphabet="none"))


@pytest.fixture(scope="module")
def uncased(shared_dir):
    return load_tokenizer(shared_dir / "vocab" / "bert-base-uncased.vocab.txt")


# ----------------------------------------------------------------------------- training
def test_trained_special_token_ids(trained):
    assert len(trained) == 8000
    assert trained.convert_ids_to_tokens([0, 1, 2, 3, 4]) == list(SPECIAL_TOKENS)
    assert trained.pad_token_id == 0
    assert (trained.unk_token_id, trained.cls_token_id, trained.sep_token_id, trained.mask_token_id) == (1, 2, 3, 4)
    assert special_token_ids(trained) == [0, 1, 2, 3, 4]


def test_trained_encodings_start_with_cls_end_with_sep(trained):
    for sentence in SAMPLES:
        ids = trained(sentence)["input_ids"]
        assert ids[0] == trained.cls_token_id
        assert ids[-1] == trained.sep_token_id
        assert trained.cls_token_id not in ids[1:-1] and trained.sep_token_id not in ids[1:-1]
    assert trained("")["input_ids"] == [2, 3]
    # [MASK] written in text is the mask token, not split into pieces.
    assert trained.mask_token_id in trained(SAMPLES[3])["input_ids"]


def test_trained_tokenizer_is_lowercase_wordpiece(trained):
    assert trained("Emma")["input_ids"] == trained("emma")["input_ids"]
    tokens = trained.tokenize("unmistakably")
    assert tokens and all(t == tokens[0] or t.startswith("##") for t in tokens)


def test_encode_documents_matches_tokenizer_without_specials(trained):
    arrays = encode_documents(trained, SAMPLES)
    assert len(arrays) == len(SAMPLES)
    for sentence, array in zip(SAMPLES, arrays, strict=True):
        assert array.dtype == np.int32
        assert array.tolist() == trained(sentence, add_special_tokens=False)["input_ids"]


def test_encode_documents_encodes_chinese_reviews_as_the_tokenizer_does(shared_dir):
    """Chinese text takes the vectorised path (the token store's): ids equal to transformers' own,
    a call that already padded and truncated (fill-mask does) changing nothing."""
    chinese = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"]
    texts = reviews.dropna().astype(str).tolist()[:300]
    chinese(texts[:2], padding="max_length", truncation=True, max_length=8)  # padding and truncation kept in its state
    arrays = encode_documents(chinese, texts)
    assert [array.tolist() for array in arrays] == [chinese(text, add_special_tokens=False)["input_ids"]
                                                   for text in texts]
    assert sum(map(len, arrays)) > 300 * 8  # whole reviews: neither cut nor padded


def test_save_pretrained_round_trip_with_auto_tokenizer(trained, tmp_path):
    trained.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(loaded) == len(trained)
    for attribute, token in zip(
        ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL_TOKENS, strict=True
    ):
        assert getattr(loaded, attribute) == token
        assert loaded.convert_tokens_to_ids(token) == trained.convert_tokens_to_ids(token)
    assert set(SPECIAL_TOKENS) <= set(loaded.all_special_tokens)
    for sentence in SAMPLES:
        assert loaded(sentence)["input_ids"] == trained(sentence)["input_ids"], sentence
    # The project's own loader accepts the directory too.
    again = load_tokenizer(tmp_path)
    assert [again(s)["input_ids"] for s in SAMPLES] == [trained(s)["input_ids"] for s in SAMPLES]


def test_unknown_rate_on_held_out_book_below_one_percent(trained, shared_dir):
    held_out = _paragraphs(shared_dir / "corpora" / "gutenberg" / HELD_OUT_BOOK)[::2]
    assert HELD_OUT_BOOK not in TRAIN_BOOKS
    ids = encode_documents(trained, held_out)
    total = sum(len(a) for a in ids)
    assert total > 100_000
    rate = unknown_token_rate(trained, held_out)
    assert rate == sum(int((a == trained.unk_token_id).sum()) for a in ids) / total
    assert rate < 0.01


def test_train_wordpiece_rejects_tiny_vocab():
    with pytest.raises(ValueError, match=r"tokenizer\.vocab_size"):
        TokenizerConfig(vocab_size=5)
    with pytest.raises(ValueError, match=r"tokenizer\.min_frequency"):
        TokenizerConfig(min_frequency=0)
    TokenizerConfig(vocab_size=6)  # the smallest allowed size


def test_train_wordpiece_small_synthetic_is_usable():
    tokenizer = train_wordpiece(synthetic_sentences(300), TokenizerConfig(vocab_size=120, base_alphabet="none"))
    assert 5 < len(tokenizer) <= 120
    assert tokenizer.pad_token_id == 0
    assert unknown_token_rate(tokenizer, synthetic_sentences(50, seed=1)) == 0.0


# ----------------------------------------------------------------------------- existing vocabularies
def test_load_bert_base_uncased(uncased, shared_dir):
    assert len(uncased) == 30522
    assert uncased.pad_token_id == 0
    assert (uncased.cls_token_id, uncased.sep_token_id, uncased.mask_token_id, uncased.unk_token_id) == (
        101,
        102,
        103,
        100,
    )
    assert uncased("The")["input_ids"] == [101, 1996, 102]
    lines = _wikitext_lines(shared_dir)[::2]
    assert unknown_token_rate(uncased, lines) < 0.01
    ids = np.concatenate(encode_documents(uncased, lines))
    # Not only special tokens (the transformers-5 pitfall): real word pieces, many of them.
    assert len(np.unique(ids)) > 5000
    assert np.isin(ids, special_token_ids(uncased)).mean() < 0.01


def test_chinese_chars_false_survives_save_pretrained(shared_dir, tmp_path):
    tokenizer = load_tokenizer(
        shared_dir / "vocab" / "bert-base-chinese.vocab.txt", lowercase=False, chinese_chars=False
    )
    text = "我爱自然语言处理"
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_bert_base_chinese_one_token_per_character(shared_dir):
    chinese = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt", lowercase=False)
    assert len(chinese) == 21128
    text = "我爱自然语言处理"
    tokens = chinese.tokenize(text)
    assert tokens == list(text)
    ids = chinese(text)["input_ids"]
    assert ids[0] == chinese.cls_token_id and ids[-1] == chinese.sep_token_id
    assert len(ids) == len(text) + 2
    assert chinese.unk_token_id not in ids


def test_read_vocab_file_bert_base_uncased(shared_dir):
    vocab = read_vocab_file(shared_dir / "vocab" / "bert-base-uncased.vocab.txt")
    assert len(vocab) == 30522
    assert vocab["[PAD]"] == 0 and vocab["the"] == 1996


def _write_vocab(path, tokens):
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


GOOD_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "the", "##s", "cat"]


def test_small_vocab_file_and_directory_load(tmp_path):
    _write_vocab(tmp_path / "vocab.txt", GOOD_TOKENS)
    from_file = load_tokenizer(tmp_path / "vocab.txt")
    from_dir = load_tokenizer(tmp_path)
    assert len(from_file) == len(from_dir) == len(GOOD_TOKENS)
    assert from_file("The cats")["input_ids"] == [2, 7, 9, 8, 3]
    assert from_dir("The cats dog")["input_ids"] == [2, 7, 9, 8, 1, 3]


def test_vocab_with_crlf_line_endings_loads(tmp_path):
    (tmp_path / "vocab.txt").write_bytes("\r\n".join(GOOD_TOKENS).encode() + b"\r\n")
    assert read_vocab_file(tmp_path / "vocab.txt")["cat"] == 9


@pytest.mark.parametrize(
    ("tokens", "fragment"),
    [
        (GOOD_TOKENS + ["cat", "a"], "duplicate"),
        ([t for t in GOOD_TOKENS if t != "[MASK]"], r"\[MASK\]"),
        (["a"] + [t for t in GOOD_TOKENS if t != "a"], "id 0"),
        (GOOD_TOKENS[1:] + ["[PAD]"], "id 0"),
    ],
    ids=["duplicates", "missing-special", "pad-not-first", "pad-last"],
)
def test_bad_vocab_files_raise(tmp_path, tokens, fragment):
    path = _write_vocab(tmp_path / "vocab.txt", tokens)
    with pytest.raises(VocabularyError, match=fragment):
        read_vocab_file(path)
    with pytest.raises(VocabularyError, match=r"tokenizer\.vocab_path"):
        load_tokenizer(path)


def test_missing_vocab_path_raises(tmp_path):
    with pytest.raises(VocabularyError, match=r"tokenizer\.vocab_path"):
        load_tokenizer(tmp_path / "nope.txt")
    with pytest.raises(VocabularyError, match=r"tokenizer\.vocab_path"):
        load_tokenizer(tmp_path)  # an empty directory


# ----------------------------------------------------------------------------- the whole alphabet (English and Chinese)
def _held_out_unknown_rate(shared_dir, corpus, column, **train):
    from bert_mlm.config import CorpusConfig
    from bert_mlm.core.data.corpus import clean_documents
    from bert_mlm.core.data.sources import read_corpus

    documents, _ = clean_documents(read_corpus(shared_dir / "corpora" / corpus, column), min_words=1,
                                   ratios=CorpusConfig().split_ratios)
    tokenizer = train_wordpiece(documents.loc[documents["split"] == "train", "text"].tolist(),
                                TokenizerConfig(**{"base_alphabet": "none", **train}))
    ids = np.concatenate(encode_documents(tokenizer, documents.loc[documents["split"] == "test", "text"].tolist()))
    return tokenizer, float((ids == tokenizer.unk_token_id).mean())


def test_a_chinese_vocabulary_keeps_its_characters(shared_dir, caplog):
    tokenizer, unknown = _held_out_unknown_rate(
        shared_dir, "chnsenticorp/ChnSentiCorp_htl_all.csv", "review", vocab_size=8192
    )
    assert unknown < 0.003  # held-out reviews; tokenizers' default cap of 1,000 characters gave 3.8 %
    assert len(tokenizer) > 4000
    # The corpus has fewer candidates than 8,192 (CJK characters never merge): said, with the reason.
    assert "tokenizer.vocab_size: the vocabulary has" in caplog.text and "min_frequency=2" in caplog.text
    capped, capped_unknown = _held_out_unknown_rate(shared_dir, "chnsenticorp/ChnSentiCorp_htl_all.csv", "review",
                                                    vocab_size=8192, limit_alphabet=1000)
    assert capped_unknown > 10 * unknown and len(capped) < len(tokenizer)


def test_an_english_vocabulary_reaches_its_size(shared_dir):
    tokenizer, unknown = _held_out_unknown_rate(shared_dir, "gutenberg", "text", vocab_size=8192)
    assert len(tokenizer) == 8192 and unknown < 0.003


def test_the_alphabet_needs_two_passes_over_a_stream():
    texts = [f"text number {i} with a few words" for i in range(50)]
    with pytest.raises(TypeError, match="callable"):
        train_wordpiece(iter(texts), TokenizerConfig(vocab_size=64, min_frequency=1, base_alphabet="none"))
    config = TokenizerConfig(vocab_size=64, min_frequency=1, base_alphabet="none")
    from_callable = train_wordpiece(lambda: iter([texts[:25], texts[25:]]), config)
    assert from_callable.get_vocab() == train_wordpiece(texts, config).get_vocab()


def test_the_same_corpus_gives_the_same_vocabulary_every_time():
    """tokenizers' trainer numbers "##c" pieces in hash-map order and breaks ties by those ids
    (huggingface/tokenizers#1794): on this corpus 6 runs gave 3 vocabularies before the pieces
    were reserved up front."""
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "theta", "kappa", "sigma"]
    texts = [" ".join(rng.choice(words, size=20)) for _ in range(200)]
    config = TokenizerConfig(vocab_size=60, min_frequency=1, base_alphabet="none")
    vocabularies = {tuple(sorted(train_wordpiece(texts, config).get_vocab().items()))
                    for _ in range(8)}
    assert len(vocabularies) == 1
    vocabulary = dict(next(iter(vocabularies)))
    # The merges, pinned: every process (every test run) must break the ties the same way. Unreserved,
    # runs learned "alph" or "kapp" or neither, and "##eg"/"omeg" or not (4 vocabularies in 16 runs).
    # A tokenizers release that changes its algorithm may change them: check and update them then.
    words = sorted(t for t in vocabulary if len(t) > 1 and not t.startswith(("##", "[")))
    pieces = sorted(t for t in vocabulary if t.startswith("##") and len(t) > 3)
    assert words == ["alp", "alpha", "beta", "del", "delta", "gam", "gamma", "kap", "kappa", "omeg", "omega", "sigma",
                     "theta"]
    assert pieces == ["##am", "##ap", "##eg", "##el", "##eta", "##gma", "##ha", "##heta", "##igma", "##lp", "##ma",
                      "##meg", "##pa", "##ta"]
    assert not any(token.startswith("##") and token[2:] in ".,;" for token in vocabulary)


# ----------------------------------------------------------------------------- the base alphabet
def test_the_base_alphabet_covers_encyclopedic_english(shared_dir):
    """Gutenberg books, the project's default tokenizer settings, WikiText-2 valid held out: without
    the base alphabet 1.2 % [UNK] ("=" occurs once in the books, then dashes, curly quotes, "°")."""
    from bert_mlm.config import CorpusConfig
    from bert_mlm.core.data.corpus import clean_documents
    from bert_mlm.core.data.sources import read_corpus

    config = TokenizerConfig()
    documents, _ = clean_documents(read_corpus(shared_dir / "corpora" / "gutenberg", "text"),
                                   ratios=CorpusConfig().split_ratios)
    books = documents.loc[documents["split"] == "train", "text"].tolist()
    wiki = [
        line for line in (shared_dir / "corpora/wikitext-2-raw/wiki.valid.raw").read_text().split("\n") if line.strip()
    ]
    rates = {}
    for setting in (config.base_alphabet, "none"):
        tokenizer = train_wordpiece(books, config.replace(base_alphabet=setting))
        rates[setting] = unknown_token_rate(tokenizer, wiki)
    assert rates["default"] < 0.005 < 0.01 < rates["none"], rates


def test_the_base_alphabet_does_not_cost_chinese_coverage(shared_dir):
    with_base, unknown = _held_out_unknown_rate(shared_dir, "chnsenticorp/ChnSentiCorp_htl_all.csv", "review",
                                                vocab_size=8192, base_alphabet="default")
    without, unknown_without = _held_out_unknown_rate(shared_dir, "chnsenticorp/ChnSentiCorp_htl_all.csv", "review",
                                                      vocab_size=8192)
    assert unknown <= unknown_without < 0.003
    assert {"，", "。", "、", "《", "》", "「", "」", "：", "？", "！"} <= set(with_base.get_vocab())


def test_base_alphabet_characters_stay_whatever_min_frequency_says():
    texts = synthetic_sentences(300)  # plain lowercase words: no "=", "°", "£", "–", "，"
    vocabularies = [train_wordpiece(texts, TokenizerConfig(vocab_size=400, min_frequency=5, base_alphabet=setting))
                    .get_vocab() for setting in ("default", "default", "none", "=£")]
    default, again, none, own = vocabularies
    assert default == again  # deterministic
    assert {"=", "+", "#", "–", "—", "“", "”", "…", "°", "€", "£", "，", "。", "（", "）"} <= set(default)
    # "##" forms where a character can continue a word ("25°c", "h2o"), not for punctuation,
    # which the pre-tokenizer always splits off.
    assert {"##°", "##£", "##2", "##q"} <= set(default) and not {"##=", "##–", "##，", "##("} & set(default)
    assert "A" not in default and "a" in default  # as the uncased tokenizer sees it
    assert not {"=", "°", "£", "，"} & set(none)
    assert {"=", "£", "##£"} <= set(own) and "°" not in own
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=400, min_frequency=5, base_alphabet="default"))
    for text in ("It was 25°C = 77°F (“warm”) – £3…", "【note】：120￥，“ok”！"):
        assert tokenizer.unk_token_id not in encode_documents(tokenizer, [text])[0].tolist(), text


def test_a_bad_base_alphabet_is_named():
    with pytest.raises(UserError, match="tokenizer.base_alphabet"):
        TokenizerConfig(base_alphabet="")


# ----------------------------------------------------------------------------- accents and kana
JAPANESE = [
    "がくせいはでんしゃでがっこうにいきます。",
    "ぼくはパンとごはんがだいすきです。",
    "ドイツのビールはおいしいですが、たかいです。",
    "きのうはざんぎょうでおそくなりました。",
    "ぜんぶでごせんえんです。",
    "バスていでまっていてください。",
    "でんわばんごうをおしえてください。",
    "ぶどうとみかんをかいました。",
    "日本語の勉強はむずかしいですが、たのしいです。",
    "ピアノをひくのがじょうずですね。",
] * 20


def test_japanese_keeps_its_voicing_marks_through_the_zh_settings(tmp_path):
    """conf/zh leaves lowercase and strip_accents as conf/base has them (true, null): stripping
    accents turned が into か and で into て. On mostly-CJK text it is off, and stays off on reload."""
    config = TokenizerConfig(vocab_size=21128, limit_alphabet=None, chinese_chars=True)  # conf/zh's tokenizer
    tokenizer = train_wordpiece(JAPANESE, config)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    reloaded = load_tokenizer(tmp_path / "tokenizer")
    for candidate in (tokenizer, reloaded):
        for line in JAPANESE[:10]:
            ids = candidate(line)["input_ids"]
            assert candidate.unk_token_id not in ids
            assert candidate.decode(ids, skip_special_tokens=True).replace(" ", "") == line


def test_english_accents_are_still_stripped_when_lowercasing():
    texts = ["Café naïve résumé Ångström ÉCOLE façade"] * 5 + synthetic_sentences(200)
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=300, min_frequency=2, base_alphabet="none"))
    assert tokenizer.backend_tokenizer.normalizer.normalize_str("Café naïve ÉCOLE") == "cafe naive ecole"
    kept = train_wordpiece(texts, TokenizerConfig(vocab_size=300, min_frequency=2, strip_accents=False,
                                                  base_alphabet="none"))
    assert kept.backend_tokenizer.normalizer.normalize_str("Café naïve ÉCOLE") == "café naïve école"
