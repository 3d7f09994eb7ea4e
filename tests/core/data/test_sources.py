"""Corpus sources: files, directories, globs, tables, binary and undecodable input, the built-in corpus."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from bert_mlm.core.data.corpus import BUILTIN_SOURCE, CorpusError, clean_documents
from bert_mlm.core.data.sources import builtin_corpus, decode_text, list_corpus_files, read_corpus


def resolve_corpus_files(path):
    return [file for file, _ in list_corpus_files(path)]


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


# ----------------------------------------------------------------------------- one paragraph per line
def texts_of(path, line_by_line="auto", chunk_bytes=1 << 16) -> list[str]:
    from bert_mlm.core.data.sources import CorpusSource

    items = [item for batch in CorpusSource(str(path)).batches(chunk_bytes, line_by_line) for item in batch]
    return clean_documents(items, deduplicate=False)[0]["text"].tolist()


def _wrapped(paragraphs: list[str], width: int) -> str:
    """Paragraphs hard-wrapped at ``width`` characters, a blank line between them (as books are)."""
    return "\n\n".join("\n".join(p[i:i + width] for i in range(0, len(p), width)) for p in paragraphs) + "\n"


def test_line_by_line_auto_reads_chinese_news_one_paragraph_per_line_and_wrapped_chinese_joined(
        tmp_path, shared_dir, caplog):
    lines = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()[:3000]
    (tmp_path / "news.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bert_mlm.core.data.sources"):
        per_line = texts_of(tmp_path / "news.txt", chunk_bytes=1 << 16)  # several chunks
    assert per_line == texts_of(tmp_path / "news.txt", True) and len(per_line) > 2900
    assert per_line[:2] == [line.strip() for line in lines[:2]]
    assert len(texts_of(tmp_path / "news.txt", False)) < 10  # joined: the 21-document corpus of issue 34
    decided = [r.getMessage() for r in caplog.records if "line_by_line=auto" in r.getMessage()]
    assert len(decided) == 1 and "news.txt' is read one paragraph per line" in decided[0]
    # The same sentences hard-wrapped at 35 characters, 10 to a paragraph: joined (most lines end mid-sentence).
    paragraphs = ["".join(lines[i:i + 10]) for i in range(0, 300, 10)]
    (tmp_path / "novel.txt").write_text(_wrapped(paragraphs, 35), encoding="utf-8")
    joined = texts_of(tmp_path / "novel.txt")
    assert joined == texts_of(tmp_path / "novel.txt", False) and len(joined) == len(paragraphs)


def test_line_by_line_auto_joins_hard_wrapped_english_books_and_splits_wikitext(shared_dir, tmp_path):
    book = shared_dir / "corpora" / "gutenberg" / "austen-persuasion.txt"
    assert texts_of(book) == texts_of(book, False)
    assert len(texts_of(book, True)) > 3 * len(texts_of(book))  # every wrapped line would be a document
    wiki = shared_dir / "corpora" / "wikitext-2-raw" / "wiki.valid.raw"  # one paragraph per line, some adjacent
    assert texts_of(wiki) == texts_of(wiki, True) and len(texts_of(wiki)) > len(texts_of(wiki, False))


def test_line_by_line_decision_and_setting_are_checked():
    from bert_mlm.config import CorpusConfig
    from bert_mlm.core.data.sources.streams import lines_are_paragraphs
    from bert_mlm.errors import UserError

    assert lines_are_paragraphs("第一句话。\n第二句话！\n第三句？\n第四句。\n".encode())[0]
    assert lines_are_paragraphs(b"A line that ends.\nAnother one here.\nAnd a third one.\nFourth.\n")[0]
    assert not lines_are_paragraphs(b"The wrapped line of\na paragraph that goes\non and on until it\nends.\n")[0]
    assert not lines_are_paragraphs(b"One.\n\nTwo.\n\nThree.\n")[0]  # blank lines: nothing to decide
    for value in ("auto", True, False):
        assert CorpusConfig(line_by_line=value).line_by_line == value
    for value in ("yes", 1, "true"):  # strict: a quoted "true" is not true
        with pytest.raises(UserError, match=rf"corpus\.line_by_line: {value!r} must be 'auto', true or false"):
            CorpusConfig(line_by_line=value)


@pytest.mark.parametrize("line_by_line", ["auto", True, False])
def test_byte_ranges_read_by_workers_give_the_documents_of_the_whole_file(tmp_path, shared_dir, line_by_line):
    """The Dask path cuts text files into byte ranges that both neighbours end alike: one paragraph
    per line or blank-line paragraphs, CRLF or LF, the documents are those of reading the file whole."""
    from bert_mlm.core.data.sources import CorpusSource, read_task, read_tasks

    news = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_bytes()[:300_000]
    news = news[: news.rindex(b"\n") + 1]
    book = (shared_dir / "corpora" / "gutenberg" / "melville-moby_dick.txt").read_bytes()[:300_000]  # CRLF
    for name, data in (("news.txt", news.replace(b"\n", b"\r\n", 500)), ("book.txt", book)):
        if name == "news.txt" and line_by_line is False:
            continue  # one 300 KB paragraph, cut where the read limit falls: engines may cut it elsewhere
        (tmp_path / name).write_bytes(data)
        tasks = list(read_tasks(CorpusSource(str(tmp_path / name)), 1 << 16, line_by_line=line_by_line))
        assert [t.kind for t in tasks] == ["range"] * len(tasks) and len(tasks) >= 4
        ranged = clean_documents([item for task in tasks for item in read_task(task)], deduplicate=False)[0]
        assert ranged["text"].tolist() == texts_of(tmp_path / name, line_by_line)


def test_read_tasks_name_each_mixture_source_the_sequential_reading_names(tmp_path):
    """Pieces the client sends (a Hugging Face dataset, files a remote scheduler's workers cannot see)
    carry their source's name as the files workers read do."""
    from bert_mlm.core.data.sources import mixture_source, read_task, read_tasks

    datasets = pytest.importorskip("datasets")
    (tmp_path / "book.txt").write_text("A paragraph of the book, long enough.\n\nAnother paragraph of it.\n")
    datasets.Dataset.from_dict({"text": ["一段中文文本，足够长了。"]}).save_to_disk(tmp_path / "saved")
    mixture = mixture_source({"books": {"path": str(tmp_path / "book.txt")},
                              "reviews": {"hf_dataset": {"path": str(tmp_path / "saved")}}})
    expected = [item.origin for batch in mixture.batches() for item in batch]
    assert expected == ["books", "reviews"]
    for local_files in (True, False):
        tasks = list(read_tasks(mixture, 1 << 16, local_files=local_files))
        assert [item.origin for task in tasks for item in read_task(task)] == expected


@pytest.mark.parametrize("name", ["books[2024]", "notes*", "what?"])
def test_a_folder_whose_name_holds_glob_characters_is_that_folder(tmp_path, name):
    """``corpus.path`` naming an existing folder ``books[2024]`` was read as a glob that matched
    nothing ("holds no corpus file" although it holds a.txt); locally and on a remote file system."""
    import fsspec

    folder = tmp_path / name
    folder.mkdir()
    (folder / "a.txt").write_text("Some text.\n\n中文的句子。\n", encoding="utf-8")
    assert [path.name for path, _ in list_corpus_files(str(folder))] == ["a.txt"]
    if "?" not in name:  # in a URL, ? starts the query (a signed URL's signature)
        fsspec.filesystem("memory").pipe(f"/glob-names/{name}/a.txt", b"Some text.")
        remote = list_corpus_files(f"memory://glob-names/{name}")
        assert [str(url).rsplit("/", 1)[-1] for url, _ in remote] == ["a.txt"]
    assert [path.name for path, _ in list_corpus_files(str(tmp_path / "*" / "a.txt"))] == ["a.txt"]  # still a glob


def test_lines_without_sentence_ends_that_run_on_without_a_blank_line_are_documents(tmp_path):
    """Japanese titles without sentence-final punctuation, one per line, were joined into one
    100,000-character document; wrapped verse without stanza breaks (lines filled to the width) is
    still joined."""
    import random

    from bert_mlm.core.data.sources import iter_text_file
    from bert_mlm.core.data.sources.streams import lines_are_paragraphs

    rng = random.Random(0)
    kana = "日本語の文章を書くことはとても楽しいです私たちは毎日新しい言葉を学びます東京大阪京都"
    titles = "\n".join("".join(rng.choice(kana) for _ in range(rng.randint(8, 40))) for _ in range(3000)) + "\n"
    decided, why = lines_are_paragraphs(titles.encode())
    assert decided and "run on without a blank line" in why
    verse = "\n".join(" ".join(rng.choice(["of", "man's", "first", "disobedience", "and", "the", "fruit"])
                               for _ in range(40))[:60] for _ in range(3000)) + "\n"
    assert not lines_are_paragraphs(verse.encode())[0]
    path = tmp_path / "titles.txt"
    path.write_text(titles, encoding="utf-8")
    documents = [p for raw in iter_text_file(path) for p in raw.text.split("\n") if p]
    assert len(documents) == 3000


def test_a_file_that_changes_form_midway_is_read_in_each_form(tmp_path, caplog):
    """Hard-wrapped in its first 64 KiB and one paragraph per line after: each chunk is read as its
    head says, so the tail is not merged into documents of ~95,000 characters."""
    from bert_mlm.core.data.sources import iter_text_file
    from bert_mlm.core.data.sources.streams import HEAD_BYTES

    words = "the quick brown fox jumps over the lazy dog while a cat watches from the wall".split()
    wrapped = ("\n".join(" ".join(words[(i + j) % len(words)] for j in range(11)) for i in range(6)) + "\n\n") * 400
    assert len(wrapped.encode()) > HEAD_BYTES
    lines = "".join(f"Sentence number {i} is a line of its own, as in a corpus dump.\n" for i in range(6000))
    path = tmp_path / "mixed.txt"
    path.write_text(wrapped + lines, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bert_mlm.core.data.sources.streams"):
        raws = list(iter_text_file(path, chunk_bytes=HEAD_BYTES))
    assert [raw.line_by_line for raw in raws][0] is False and raws[-1].line_by_line is True
    assert any("from here on" in record.getMessage() for record in caplog.records)
