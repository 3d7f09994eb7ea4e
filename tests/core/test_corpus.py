"""Corpus reading, cleaning, de-duplication and the hash split."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from bert_mlm.core.corpus import (
    BUILTIN_SOURCE,
    CorpusConfig,
    CorpusError,
    RawText,
    assign_splits,
    builtin_corpus,
    clean_documents,
    decode_text,
    document_hash,
    normalise,
    read_corpus,
    resolve_corpus_files,
    split_paragraphs,
    validate_split_ratios,
)

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
    assert frame["doc_hash"].tolist() == [document_hash(long_a), document_hash(long_b)]
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


# ----------------------------------------------------------------------------- decoding and reading
def test_decode_text_replaces_and_counts_undecodable_bytes():
    raw = decode_text(b"abc\xff\xfe def", "bad.txt")
    assert raw.text == "abc\ufffd\ufffd def"
    assert raw.replaced_bytes == 2
    assert raw.source == "bad.txt"


def test_decode_text_does_not_count_genuine_replacement_characters():
    raw = decode_text("valid \ufffd text".encode(), "ok.txt")
    assert raw.replaced_bytes == 0
    assert raw.text == "valid \ufffd text"


def test_replaced_bytes_reach_the_cleaning_report(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"A paragraph with a broken byte \xff in it.\n\nAnother \xc3 one, long enough.")
    frame, report = clean_documents(read_corpus(tmp_path))
    assert report.replaced_bytes == 2
    assert all("\ufffd" in t for t in frame["text"])


def test_binary_file_raises_corpus_error_naming_the_file(tmp_path):
    binary = tmp_path / "image.txt"
    binary.write_bytes(b"GIF89a\x00\x01\x02\x00\x00some text")
    with pytest.raises(CorpusError, match="image.txt"):
        read_corpus(tmp_path)
    with pytest.raises(CorpusError, match="binary"):
        decode_text(binary.read_bytes(), str(binary))
    # UTF-16 text and database files are mostly NUL and control bytes: binary.
    with pytest.raises(CorpusError, match=r"utf16\.txt.*NUL"):
        decode_text(("plain readable text " * 500).encode("utf-16-le"), "utf16.txt")
    # Text with a stray NUL byte is text, wherever the NUL is (in the first 64 KiB or later):
    # the NUL is removed and counted, as undecodable bytes are.
    decoded = decode_text(b"plain readable text " * 500 + b"\x00", "almost-text.txt")
    assert "\x00" not in decoded.text and decoded.replaced_bytes == 1


def test_mostly_control_characters_are_refused(tmp_path):
    with pytest.raises(CorpusError, match="ctl.txt"):
        decode_text(bytes(range(1, 9)) * 100, "ctl.txt")


def test_missing_path_raises_naming_corpus_path(tmp_path):
    with pytest.raises(CorpusError, match=r"corpus\.path") as info:
        read_corpus(tmp_path / "does-not-exist")
    assert "does-not-exist" in str(info.value)


def test_glob_without_match_raises_naming_corpus_path(tmp_path):
    with pytest.raises(CorpusError, match=r"corpus\.path.*matches no file"):
        read_corpus(str(tmp_path / "*.txt"))


def test_directory_without_supported_files_raises(tmp_path):
    (tmp_path / "notes.docx").write_bytes(b"whatever")
    with pytest.raises(CorpusError, match=r"corpus\.path"):
        resolve_corpus_files(tmp_path)


def test_resolve_corpus_files_recursive_sorted_and_filtered(tmp_path):
    (tmp_path / "b").mkdir()
    for name in ("z.txt", "a.md", "b/c.raw", "b/d.jsonl", "skip.bin", "b/skip.py"):
        (tmp_path / name).write_text("x")
    files = resolve_corpus_files(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["a.md", "b/c.raw", "b/d.jsonl", "z.txt"]
    globbed = resolve_corpus_files(str(tmp_path / "**" / "*.raw"))
    assert [p.name for p in globbed] == ["c.raw"]
    single = resolve_corpus_files(tmp_path / "z.txt")
    assert single == [tmp_path / "z.txt"]


TABLE_ROWS = [
    "First row of the table, with a comma.",
    'Second row with "quotes" and\na newline inside the cell.',
    "Third row: caf\u00e9 and \u6f22\u5b57.",
]


def _write_table(path, suffix, column="body"):
    frame = pd.DataFrame({"id": [1, 2, 3], column: TABLE_ROWS})
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True, force_ascii=False)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_tables_read_their_text_column(tmp_path, suffix):
    path = tmp_path / f"table{suffix}"
    _write_table(path, suffix)
    items = read_corpus(path, text_column="body")
    assert [i.text for i in items] == TABLE_ROWS
    assert all(i.is_document and i.source == str(path) for i in items)
    frame, report = clean_documents(items, min_words=3)
    assert frame["text"].tolist() == [
        TABLE_ROWS[0],
        'Second row with "quotes" and a newline inside the cell.',
        TABLE_ROWS[2],
    ]
    assert report.raw_items == 3


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_table_without_text_column_names_parameter_and_file(tmp_path, suffix):
    path = tmp_path / f"table{suffix}"
    _write_table(path, suffix, column="content")
    with pytest.raises(CorpusError) as info:
        read_corpus(path, text_column="body")
    message = str(info.value)
    assert "corpus.text_column" in message
    assert str(path) in message
    assert "body" in message


def test_mixed_directory_reads_text_and_tables(tmp_path):
    (tmp_path / "book.txt").write_text("Paragraph one of the book, long.\n\nParagraph two of the book, long.")
    _write_table(tmp_path / "rows.jsonl", ".jsonl", column="text")
    frame, report = clean_documents(read_corpus(tmp_path))
    assert len(frame) == 5
    assert report.sources == 2


# ----------------------------------------------------------------------------- the hash split
def _docs(n, seed=0, prefix="doc"):
    rng = random.Random(seed)
    return [f"{prefix} {i} {rng.random():.12f}" for i in range(n)]


def test_assign_splits_is_deterministic():
    hashes = [document_hash(t) for t in _docs(500)]
    assert assign_splits(hashes, RATIOS) == assign_splits(list(hashes), dict(RATIOS))


def test_assign_splits_independent_of_order():
    hashes = [document_hash(t) for t in _docs(1000)]
    original = dict(zip(hashes, assign_splits(hashes, RATIOS), strict=True))
    shuffled = hashes[:]
    random.Random(1).shuffle(shuffled)
    again = dict(zip(shuffled, assign_splits(shuffled, RATIOS), strict=True))
    assert again == original


def test_assign_splits_stable_when_corpus_grows():
    old = [document_hash(t) for t in _docs(1000, seed=0)]
    new = [document_hash(t) for t in _docs(1000, seed=7, prefix="new")]
    before = assign_splits(old, RATIOS)
    grown = new[:500] + old + new[500:]
    after = dict(zip(grown, assign_splits(grown, RATIOS), strict=True))
    assert [after[h] for h in old] == before


def test_assign_splits_ratios_roughly_respected():
    hashes = [document_hash(t) for t in _docs(5000)]
    ratios = {"train": 0.8, "valid": 0.1, "test": 0.1}
    splits = assign_splits(hashes, ratios)
    for name, expected in ratios.items():
        assert abs(splits.count(name) / len(splits) - expected) < 0.02, name


def test_assign_splits_salt_changes_the_split():
    hashes = [document_hash(t) for t in _docs(2000)]
    ratios = {"train": 0.5, "valid": 0.25, "test": 0.25}
    assert assign_splits(hashes, ratios, salt="a") != assign_splits(hashes, ratios, salt="b")


def test_assign_splits_all_train():
    hashes = [document_hash(t) for t in _docs(200)]
    assert set(assign_splits(hashes, {"train": 1.0})) == {"train"}


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


def test_real_corpus_glob(shared_dir):
    pattern = str(shared_dir / "corpora" / "gutenberg" / "*.txt")
    files = resolve_corpus_files(pattern)
    expected = sorted((shared_dir / "corpora" / "gutenberg").glob("*.txt"))
    assert files == expected


# ----------------------------------------------------------------------------- built-in corpus
def test_builtin_corpus_deterministic_and_independent_of_workers():
    # Two calls (each scans the whole stdlib, ~1 s): equal results across calls and across
    # worker counts at once.
    first = builtin_corpus(max_files=20, workers=1)
    parallel = builtin_corpus(max_files=20, workers=2)
    assert len(first) > 20
    assert len({r.source for r in first}) > 5
    key = [(r.source, r.text) for r in first]
    assert key == [(r.source, r.text) for r in parallel]
    assert all(r.source.startswith(BUILTIN_SOURCE + "/") for r in first)
    frame, _ = clean_documents(first)
    assert len(frame) > 0


def test_decode_text_counts_bytes_of_truncated_sequences():
    raw = decode_text(b"ab\xf0\x9f\x98", "cut.txt")  # the first 3 of the 4 bytes of an emoji
    assert raw.text == "ab\ufffd"
    assert raw.replaced_bytes == 3
