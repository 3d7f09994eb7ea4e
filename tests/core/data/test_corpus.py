"""Corpus cleaning, de-duplication and the hash split (reading: test_sources.py)."""

from __future__ import annotations

import hashlib
import random

import pytest

from bert_mlm.config import CorpusConfig
from bert_mlm.core.common.text import readable_spacing
from bert_mlm.core.data.corpus import (
    RawText,
    clean_documents,
    normalise,
    split_paragraphs,
    validate_split_ratios,
)
from bert_mlm.core.data.sources import read_corpus

RATIOS = {"train": 0.9, "valid": 0.05, "test": 0.05}


# ----------------------------------------------------------------------------- normalisation
def test_normalise_line_endings_to_lf():
    assert normalise("one\r\ntwo\rthree\nfour") == "one\ntwo\nthree\nfour"
    assert "\r" not in normalise("a\r\n\r\nb\r")


def test_normalise_nfc():
    decomposed = "Cafe\u0301 na\u0131\u0308ve"  # e + combining acute
    result = normalise(decomposed)
    assert "\u00e9" in result
    assert "\u0301" not in result
    assert normalise("e\u0301") == "\u00e9"
    # Already-NFC text is unchanged.
    assert normalise("caf\u00e9") == "caf\u00e9"


def test_normalise_collapses_spaces_and_tabs_but_keeps_newlines():
    assert normalise("a  \t b\n\nc") == "a b\n\nc"


def test_split_paragraphs_joins_wrapped_lines_and_blank_line_ends_paragraph():
    text = (
        "The first paragraph is\r\n"
        "hard-wrapped over\r\n"
        "   three lines.\r\n"
        "\r\n"
        "The second one\n"
        "has two.\n"
        "  \t \n"  # a blank line made of whitespace still ends a paragraph
        "Third.\n\n\n\n"
        "Fourth after many blank lines."
    )
    assert split_paragraphs(text) == [
        "The first paragraph is hard-wrapped over three lines.",
        "The second one has two.",
        "Third.",
        "Fourth after many blank lines.",
    ]


def test_split_paragraphs_single_newline_does_not_split():
    assert split_paragraphs("line one\nline two\nline three") == ["line one line two line three"]


def test_wrapped_chinese_and_japanese_lines_join_without_a_space_but_korean_and_latin_keep_it():
    text = "房间很\n干净，服务\n也好。\n使用Python\n语言\n\n今日は\nいい天気\n\n오늘은\n날씨가 좋다"
    assert split_paragraphs(text) == ["房间很干净，服务也好。使用Python 语言", "今日はいい天気", "오늘은 날씨가 좋다"]


# ----------------------------------------------------------------------------- cleaning
def test_clean_documents_drops_short_and_counts_exact_duplicates():
    long_a = "A paragraph that is clearly long enough to keep."
    long_b = "Another paragraph, also long enough to be kept here."
    text = f"{long_a}\n\nShort.\n\n{long_b}\n\n{long_a}\n\nTiny"
    items = [
        RawText(source="one.txt", text=text),
        RawText(source="two.txt", text=long_b.replace(" ", "\n", 3)),  # wrapped duplicate of long_b
    ]
    frame, report = clean_documents(items, min_words=4, deduplicate=True)
    assert frame["text"].tolist() == [long_a, long_b]
    assert frame["source"].tolist() == ["one.txt", "one.txt"]
    assert frame["doc_hash"].tolist() == [hashlib.blake2b(t.encode(), digest_size=8).hexdigest()
                                          for t in (long_a, long_b)]
    assert report.raw_items == 2
    assert report.dropped_short == 2
    assert report.dropped_duplicates == 2
    assert report.per_source == {"one.txt": 2, "two.txt": 0}
    assert report.sources == 2


def test_clean_documents_without_deduplication_keeps_duplicates():
    text = "Exactly the same paragraph text.\n\nExactly the same paragraph text."
    frame, report = clean_documents([RawText("x", text)], min_words=2, deduplicate=False)
    assert len(frame) == 2
    assert report.dropped_duplicates == 0


def test_clean_documents_min_words_boundary_counts_a_cjk_character_as_a_word():
    text = "one two three four\n\none two three\n\n房间很干净。\n\n第一章\n\nWi-Fi 很快很好"
    frame, report = clean_documents([RawText("x", text)], min_words=4)
    assert frame["text"].tolist() == ["one two three four", "房间很干净。", "Wi-Fi 很快很好"]
    assert report.dropped_short == 2


@pytest.mark.parametrize(("text", "count", "expected"), [
    ("one two three four", 4, True), ("one two three", 4, False),
    ("房间很干净", 5, True), ("房间很干净", 6, False), ("第一章" * 30_000, 4, True),
    ("很好 ok fine", 4, True), ("很好 ok", 4, False), ("ok 很 fine 好", 4, True), ("Wi-Fi 很快", 4, False),
])
def test_has_words_counts_whitespace_words_and_cjk_characters(text, count, expected):
    from bert_mlm.core.common.text import cjk_characters, has_words

    assert has_words(text, count) is expected
    assert cjk_characters(text) == sum(c in "房间很干净第一章快好" for c in text)


def test_table_rows_are_kept_unless_empty():
    rows = ["好", "很好！", "", "   ", "A fine stay."]
    frame, report = clean_documents([RawText("t.csv", r, is_document=True) for r in rows], min_words=4)
    assert frame["text"].tolist() == ["好", "很好！", "A fine stay."]
    assert report.dropped_short == 2


def test_clean_documents_table_rows_are_one_document_each():
    row = "first line of a row\n\nstill the same row\r\nafter a blank line"
    frame, _ = clean_documents([RawText("t.csv", row, is_document=True)], min_words=5)
    assert frame["text"].tolist() == ["first line of a row still the same row after a blank line"]


def test_clean_documents_applies_nfc_so_equivalent_texts_are_duplicates():
    composed = "A caf\u00e9 paragraph long enough to count."
    decomposed = "A cafe\u0301 paragraph long enough to count."
    frame, report = clean_documents([RawText("a", composed), RawText("b", decomposed)])
    assert len(frame) == 1 and report.dropped_duplicates == 1

# ----------------------------------------------------------------------------- the hash split
def _docs(n, seed=0, prefix="doc"):
    rng = random.Random(seed)
    return [f"{prefix} {i} {rng.random():.12f}" for i in range(n)]


def assign_splits(texts, ratios, salt=""):
    """Each text's split, as ingestion assigns it (a table row per text: one document each)."""
    frame, _ = clean_documents([RawText("t", text, is_document=True) for text in texts], ratios=ratios, salt=salt)
    assert frame["text"].tolist() == list(texts)
    return frame["split"].tolist()


def test_assign_splits_is_deterministic():
    texts = _docs(500)
    assert assign_splits(texts, RATIOS) == assign_splits(list(texts), dict(RATIOS))


def test_assign_splits_independent_of_order():
    texts = _docs(1000)
    original = dict(zip(texts, assign_splits(texts, RATIOS), strict=True))
    shuffled = texts[:]
    random.Random(1).shuffle(shuffled)
    again = dict(zip(shuffled, assign_splits(shuffled, RATIOS), strict=True))
    assert again == original


def test_assign_splits_stable_when_corpus_grows():
    old, new = _docs(1000, seed=0), _docs(1000, seed=7, prefix="new")
    before = assign_splits(old, RATIOS)
    grown = new[:500] + old + new[500:]
    after = dict(zip(grown, assign_splits(grown, RATIOS), strict=True))
    assert [after[t] for t in old] == before


def test_assign_splits_ratios_roughly_respected():
    ratios = {"train": 0.8, "valid": 0.1, "test": 0.1}
    splits = assign_splits(_docs(5000), ratios)
    for name, expected in ratios.items():
        assert abs(splits.count(name) / len(splits) - expected) < 0.02, name


def test_assign_splits_salt_changes_the_split():
    ratios = {"train": 0.5, "valid": 0.25, "test": 0.25}
    assert assign_splits(_docs(2000), ratios, salt="a") != assign_splits(_docs(2000), ratios, salt="b")


def test_assign_splits_all_train():
    assert set(assign_splits(_docs(200), {"train": 1.0})) == {"train"}


@pytest.mark.parametrize(
    "ratios",
    [
        {"train": 0.9, "valid": 0.2, "test": 0.05},  # sums to 1.15
        {"train": 0.5, "valid": 0.1},  # sums to 0.6
        {"train": 1.1, "valid": -0.1, "test": 0.0},  # negative
        {"train": 0.9, "dev": 0.1},  # unknown split
        {"train": 0.0, "valid": 0.5, "test": 0.5},  # no training data
    ],
)
def test_bad_split_ratios_raise_naming_parameter(ratios):
    with pytest.raises(ValueError, match=r"corpus\.split_ratios"):
        validate_split_ratios(ratios)
    with pytest.raises(ValueError, match=r"corpus\.split_ratios"):
        assign_splits(["00"], ratios)
    with pytest.raises(ValueError, match=r"corpus\.split_ratios"):
        CorpusConfig(split_ratios=ratios)


def test_corpus_config_rejects_bad_min_words():
    with pytest.raises(ValueError, match=r"corpus\.min_words"):
        CorpusConfig(min_words=0)


# ----------------------------------------------------------------------------- real data
def test_real_gutenberg_crlf_book_is_cleaned(shared_dir):
    book = shared_dir / "corpora" / "gutenberg" / "melville-moby_dick.txt"
    assert b"\r\n" in book.read_bytes()[:10000]  # the shared copy keeps CRLF line endings
    items = read_corpus(book)
    frame, report = clean_documents(items)
    assert len(frame) > 1000
    assert not frame["text"].str.contains("[\r\n]", regex=True).any()
    assert report.replaced_bytes == 0
    assert (frame["text"].str.split().str.len() >= 4).all()  # corpus.min_words
    assert frame["doc_hash"].is_unique


@pytest.mark.parametrize(("spaced", "readable"), [
    ("在成功时更需[MASK]谦卑 。", "在成功时更需[MASK]谦卑。"),  # the sentence
    ("在 成 功 时 更 需 [MASK] 谦 卑 。", "在成功时更需[MASK]谦卑。"),  # a WordPiece decode's spacing
    ("房间 很 干净 ， 服务 也 [MASK] 好 。", "房间很干净，服务也[MASK]好。"),
    ("これ は ペン です 。", "これはペンです。"),
    ("The [MASK] is returned .", "The [MASK] is returned."),
    ("Return a new list ( of items ) , then stop !", "Return a new list (of items), then stop!"),
    ("中文 English 混合 [MASK] [MASK] words", "中文 English 混合[MASK] [MASK] words"),  # Latin keeps its spaces
    ("한국어 문장 입니다 .", "한국어 문장 입니다."),  # Korean spaces its words
    ("Already tidy: nothing to do.", "Already tidy: nothing to do."),
])
def test_readable_spacing_removes_a_tokenizers_spaces_but_not_a_languages(spaced, readable):
    assert readable_spacing(spaced) == readable
    assert readable_spacing(readable) == readable
