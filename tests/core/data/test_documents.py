"""Streaming ingestion into document shards: the same documents as reading the corpus whole,
bounded chunks, the sample for tokenizer training, and damaged shards named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.data.corpus import (
    SPLITS,
    CleaningReport,
    CorpusError,
    Deduplicator,
    RawText,
    clean_batch,
    clean_documents,
    split_paragraphs,
    stream_documents,
)
from bert_mlm.core.data.documents import DocumentShards, DocumentShardWriter, sample_key
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.sources import CorpusSource, iter_table_rows, iter_text_file, read_corpus

RATIOS = {"train": 0.8, "valid": 0.1, "test": 0.1}


def write_shards(path, target, chunk_bytes=1 << 16, text_column="text", **corpus):
    stream = DocumentStream(CorpusSource(str(path), text_column), CorpusConfig(**{"split_ratios": RATIOS, **corpus}),
                            DataConfig(workers=1, chunk_bytes=chunk_bytes))
    stream.write(target)
    return DocumentShards(target), stream.report


def mixed_corpus(directory):
    """English and Chinese text files (one with CRLF) and tables, with duplicates across files."""
    directory.mkdir()
    english = "\n\n".join(f"Paragraph {i} of the English text,\nhard-wrapped over two lines." for i in range(400))
    chinese = "\n\n".join(f"第{i}段：这家酒店的服务很好，房间干净，早餐也不错。" for i in range(400))
    (directory / "a-english.txt").write_text(english, encoding="utf-8")
    (directory / "b-chinese.txt").write_bytes(chinese.replace("\n", "\r\n").encode("utf-8"))
    (directory / "c-copy.txt").write_text(english[: len(english) // 2], encoding="utf-8")  # duplicates
    pd.DataFrame({"text": [f"评论{i}：位置很方便，下次还会再来住。" for i in range(300)]}).to_csv(
        directory / "d.csv", index=False
    )
    pd.DataFrame({"text": [f"Row {i} of a parquet table with enough words." for i in range(300)]}).to_parquet(
        directory / "e.parquet"
    )
    return directory


def test_shards_hold_the_documents_of_the_whole_corpus_read_at_once(tmp_path):
    corpus = mixed_corpus(tmp_path / "corpus")
    shards, report = write_shards(corpus, tmp_path / "shards", chunk_bytes=1 << 16)
    expected, expected_report = clean_documents(read_corpus(corpus), ratios=RATIOS)
    for split in SPLITS:
        got = shards.frame(split)
        want = expected[expected["split"] == split]
        assert got["text"].tolist() == want["text"].tolist()
        assert got["source"].tolist() == want["source"].tolist()
    assert report.dropped_duplicates == expected_report.dropped_duplicates > 100
    stats = shards.stats().set_index("split")
    assert stats.loc["all", "documents"] == len(expected)
    assert stats.loc["all", "duplicates_dropped"] == expected_report.dropped_duplicates
    assert stats.loc["all", "sources"] == 5
    assert stats.loc["train", "characters"] == expected.loc[expected["split"] == "train", "text"].str.len().sum()
    assert any("酒店" in text for text in shards.frame("train")["text"])


def test_small_chunks_make_many_row_groups_and_parts(tmp_path):
    writer = DocumentShardWriter(tmp_path / "shards", row_group_bytes=2000, part_bytes=10_000)
    texts = [f"document number {i} " * 5 for i in range(2000)]
    for start in range(0, len(texts), 100):
        writer.write(clean_batch([RawText("s", t, is_document=True) for t in texts[start : start + 100]],
                                 min_words=1, ratios={"train": 1.0}))
    writer.close(CleaningReport(), {})
    shards = DocumentShards(tmp_path / "shards")
    assert len(shards.manifest["splits"]["train"]["parts"]) > 3
    assert len(shards.row_groups("train")) > len(shards.manifest["splits"]["train"]["parts"])
    assert [t for batch in shards.iter_texts("train") for t in batch] == [" ".join(t.split()) for t in texts]


def test_text_files_are_read_in_bounded_chunks_at_paragraph_boundaries(shared_data):
    book = shared_data / "corpora" / "gutenberg" / "melville-moby_dick.txt"  # CRLF line endings
    chunks = list(iter_text_file(book, chunk_bytes=1 << 16))
    assert len(chunks) > 10 and max(len(c.text.encode()) for c in chunks) < 4 << 16
    whole = book.read_bytes().decode("utf-8")
    assert [p for c in chunks for p in split_paragraphs(c.text)] == split_paragraphs(whole)


def test_a_paragraph_longer_than_the_read_limit_is_cut_between_words(tmp_path):
    path = tmp_path / "long.txt"
    words = ["word", "mot", "词语", "слово"]
    text = " ".join(words[i % 4] for i in range(60_000))  # one paragraph of ~400 kB, multi-byte characters
    path.write_text(text, encoding="utf-8")
    chunks = list(iter_text_file(path, chunk_bytes=1 << 14))
    assert len(chunks) > 2
    assert all(c.replaced_bytes == 0 for c in chunks)
    assert " ".join(c.text.strip() for c in chunks) == text


def test_tables_stream_in_row_chunks(tmp_path):
    frame = pd.DataFrame({"id": range(100), "body": [f"row {i} 第{i}行" for i in range(100)]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_json(tmp_path / "t.jsonl", orient="records", lines=True, force_ascii=False)
    for suffix in ("csv", "parquet", "jsonl"):
        chunks = list(iter_table_rows(tmp_path / f"t.{suffix}", "body", chunk_rows=7))
        assert len(chunks) == 15
        assert [r.text for c in chunks for r in c] == frame["body"].tolist()
        with pytest.raises(CorpusError, match=r"corpus\.text_column: column 'text' does not exist"):
            list(iter_table_rows(tmp_path / f"t.{suffix}", "text"))


def test_deduplicator_matches_a_set_and_costs_eight_bytes_a_document():
    rng = np.random.default_rng(0)
    seen, dedup = set(), Deduplicator()
    for _ in range(40):
        hashes = rng.integers(0, 5000, size=300).astype(np.uint64)
        expected = []
        for h in hashes.tolist():
            expected.append(h not in seen)
            seen.add(h)
        assert dedup.first_occurrences(hashes).tolist() == expected
    assert dedup.size == len(seen)
    assert sum(run.nbytes for run in dedup._runs) == 8 * len(seen)
    assert len(dedup._runs) <= 12  # a few sorted runs, not one per batch


def test_stream_counts_match_the_batches():
    items = [RawText(f"s{i % 3}", f"text {i % 50} long enough", replaced_bytes=1, is_document=True) for i in range(200)]
    report = CleaningReport()
    kept = list(stream_documents([clean_batch(items[:100], 5), clean_batch(items[100:], 5)], True, report))
    assert sum(len(b.texts) for b in kept) == 50
    assert report.dropped_duplicates == 150 and report.replaced_bytes == 200 and report.raw_items == 200
    assert report.sources == 3


def test_tokenizer_sample_is_evenly_spread_and_fixed(tmp_path):
    keys = sample_key(np.arange(100_000))
    assert abs((keys < 0.25).mean() - 0.25) < 0.001
    assert abs((keys[:1000] < 0.25).mean() - 0.25) < 0.01 and abs((keys[-1000:] < 0.25).mean() - 0.25) < 0.01
    corpus = mixed_corpus(tmp_path / "corpus")
    shards, _ = write_shards(corpus, tmp_path / "shards", chunk_bytes=1 << 16)
    every = [t for b in shards.iter_texts("train") for t in b]
    sample = [t for b in shards.iter_texts("train", 0.3) for t in b]
    assert sample == [t for b in shards.iter_texts("train", 0.3) for t in b]
    assert 0.25 < len(sample) / len(every) < 0.35
    assert set(sample) <= set(every)
    assert any("酒店" in t for t in sample) and any("English" in t for t in sample)


def test_damaged_shards_are_named(tmp_path):
    corpus = mixed_corpus(tmp_path / "corpus")
    shards, _ = write_shards(corpus, tmp_path / "shards")
    part = tmp_path / "shards" / shards.manifest["splits"]["train"]["parts"][0]
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(CorpusError, match=r"corpus_documents: the shard '.*part-00000\.parquet' is truncated"):
        list(DocumentShards(tmp_path / "shards").iter_texts("train"))
    part.unlink()
    with pytest.raises(CorpusError, match=r"corpus_documents: the shard '.*part-00000\.parquet' is missing"):
        DocumentShards(tmp_path / "shards")
    (tmp_path / "shards" / "manifest.json").write_text('{"format": ')
    with pytest.raises(CorpusError, match=r"corpus_documents: '.*manifest\.json' is not valid JSON"):
        DocumentShards(tmp_path / "shards")


def test_a_binary_file_behind_a_short_header_is_still_refused(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes(b"A short title line for the file\n\n" + bytes(range(256)) * 2000)
    with pytest.raises(CorpusError, match=r"corpus file '.*data\.txt' looks binary"):
        list(iter_text_file(path, chunk_bytes=1 << 16))


def test_form_feed_and_ideographic_space_lines_end_paragraphs_in_chunks(tmp_path):
    path = tmp_path / "rfc.txt"
    blocks = ["First block of text.", "第二段：一行中文。", "Third block."] * 3000
    separators = ["\n\x0c\n", "\n\u3000\n", "\r\r"]
    path.write_bytes("".join(b + separators[i % 3] for i, b in enumerate(blocks)).encode("utf-8"))
    chunks = list(iter_text_file(path, chunk_bytes=1 << 16))
    assert len(chunks) > 1
    assert [p for c in chunks for p in split_paragraphs(c.text)] == split_paragraphs(path.read_bytes().decode("utf-8"))


def test_table_columns_must_hold_text(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [1, 2, 3]}), tmp_path / "numbers.parquet")
    with pytest.raises(CorpusError, match=r"column 'text' of '.*numbers\.parquet' holds int64 values, not text"):
        list(iter_table_rows(tmp_path / "numbers.parquet", "text"))
    pq.write_table(
        pa.table({"text": pa.array([b"caf\xc3\xa9", b"bad \xff byte"], pa.binary())}), tmp_path / "bytes.parquet"
    )
    rows = [r for chunk in iter_table_rows(tmp_path / "bytes.parquet", "text") for r in chunk]
    assert [r.text for r in rows] == ["café", "bad \ufffd byte"] and rows[1].replaced_bytes == 1
    assert all(r.is_document for r in rows)
    (tmp_path / "objects.jsonl").write_text('{"text": "fine"}\n{"text": {"a": 1}}\n')
    with pytest.raises(CorpusError, match=r"holds non-text values such as \{'a': 1\}"):
        list(iter_table_rows(tmp_path / "objects.jsonl", "text"))


def test_jsonl_rows_need_not_share_keys_across_chunks(tmp_path):
    (tmp_path / "mixed.jsonl").write_text("".join(['{"title": "meta"}\n'] * 3 + ['{"text": "a real document"}\n'] * 3))
    rows = [r.text for chunk in iter_table_rows(tmp_path / "mixed.jsonl", "text", chunk_rows=2) for r in chunk]
    assert rows == ["a real document"] * 3
    with pytest.raises(
        CorpusError, match=r"column 'body' does not exist in '.*mixed\.jsonl'; its columns are \['text', 'title'\]"
    ):
        list(iter_table_rows(tmp_path / "mixed.jsonl", "body", chunk_rows=2))


def test_raw_items_count_files_and_rows_not_chunks(tmp_path):
    corpus = mixed_corpus(tmp_path / "corpus")
    _, report = write_shards(corpus, tmp_path / "shards", chunk_bytes=1 << 16)
    assert report.raw_items == 3 + 300 + 300  # three text files, two tables of 300 rows


def test_no_chinese_review_is_dropped_as_short(shared_data, tmp_path):
    """Every non-empty row of a Chinese review table is a document (20 characters dropped 57 %)."""
    path = shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv"
    shards, report = write_shards(
        path, tmp_path / "shards", chunk_bytes=1 << 20, text_column="review", deduplicate=False
    )
    rows = pd.read_csv(path, dtype=str, keep_default_na=False)["review"]
    non_empty = int((rows.str.strip() != "").sum())
    assert shards.stats().set_index("split").loc["all", "documents"] == non_empty
    assert report.dropped_short == len(rows) - non_empty


# ----------------------------------------------------------------------------- mixtures (corpus.sources)
def _mixture(tmp_path, parts: dict) -> DocumentShards:
    from bert_mlm.core.data.sources import mixture_source

    stream = DocumentStream(
        mixture_source(parts), CorpusConfig(split_ratios=RATIOS), DataConfig(workers=1, chunk_bytes=1 << 16)
    )
    stream.write(tmp_path / "shards")
    return DocumentShards(tmp_path / "shards")


def _shard_bytes(shards: DocumentShards) -> dict[str, bytes]:
    return {str(p.relative_to(shards.directory)): p.read_bytes() for p in sorted(shards.directory.rglob("*.parquet"))}


@pytest.mark.parametrize("second", ["english", "chinese"])
def test_a_mixture_stores_each_sources_documents_once_whatever_its_weight(tmp_path, shared_data, second):
    """The weights are training's (each epoch draws the sources by them), not the data's: the shards of
    a 0.7/0.3 mixture and of a 0.5/0.5 one are the same bytes, each source's documents once, in order."""
    books = shared_data / "corpora" / "gutenberg"
    other = (books / "melville-moby_dick.txt") if second == "english" else (
        shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")
    parts = {"small": {"path": str(books / "austen-persuasion.txt"), "weight": 0.7},
             "large": {"path": str(other), "weight": 0.3, "text_column": "review"}}
    shards = _mixture(tmp_path / "a", parts)
    sources = shards.sources
    assert list(sources) == ["small", "large"]
    assert sum(s["train_documents"] for s in sources.values()) == shards.documents("train")
    assert sum(s["train_characters"] for s in sources.values()) == shards.characters("train")
    runs = [(name, len(texts)) for name, texts in shards.iter_source_texts("train")]
    names = [name for name, _ in runs]
    assert names == sorted(names, key=list(sources).index)  # each source's documents together, in order
    assert {name: sum(n for m, n in runs if m == name) for name in sources} == {
        name: s["train_documents"] for name, s in sources.items()}
    evened = {name: {**spec, "weight": 0.5} for name, spec in parts.items()}
    assert _shard_bytes(_mixture(tmp_path / "b", evened)) == _shard_bytes(shards)
    stats = shards.stats().set_index("split")
    assert stats.loc["train:small", "train_documents"] == sources["small"]["train_documents"]


def test_a_source_without_training_documents_is_named(tmp_path, shared_data):
    book = shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt"
    with pytest.raises(CorpusError, match=r"corpus\.sources\.again: none of its documents landed in the train split.*"
                                          "corpus.deduplicate"):
        _mixture(tmp_path, {"book": {"path": str(book)}, "again": {"path": str(book)}})


@pytest.mark.parametrize(("parts", "message"), [
    ({"a": {"path": "x.txt", "weight": 0.5}, "b": {"path": "y.txt"}}, "give every source a weight, or none"),
    ({"a": {"path": "x.txt", "weight": -1}}, r"corpus\.sources\.a\.weight: -1 must be a non-negative number"),
    ({"a": {"path": "x.txt", "weight": 0}}, r"corpus\.sources: every weight is 0; give at least one source a "
                                            r"positive weight"),
    ({"a": {"path": "x.txt", "repeat": 0}}, r"corpus\.sources\.a\.repeat: 0 must be a positive number"),
    ({"a": {"path": "x.txt", "weight": 1, "repeat": 2}}, "weight or repeat, not both"),
    ({"a": {"weight": 1}}, "exactly one of path or hf_dataset"),
    ({"a": {"path": "x.txt", "wieght": 1}}, r"unknown key\(s\) \['wieght'\]"),
    ({"a": {"path": "x.txt", "credentials": "my_s3"}}, "were not resolved"),
])
def test_mixture_settings_are_checked_with_the_key_named(parts, message):
    from bert_mlm.core.data.sources import mixture_source

    with pytest.raises(CorpusError, match=message):
        mixture_source(parts)


def test_train_documents_are_counted_per_source_and_a_source_read_again_later_is_refused(tmp_path):
    from bert_mlm.core.data.corpus import CleanedBatch, CorpusError

    def batch(origins: list[str], texts: list[str]) -> CleanedBatch:
        return CleanedBatch(sources=["s"] * len(texts), texts=texts, hashes=np.arange(len(texts), dtype=np.uint64),
                            splits=np.zeros(len(texts), dtype=np.uint8),
                            utf8_bytes=np.array([len(t.encode()) for t in texts]), origins=origins)

    writer = DocumentShardWriter(tmp_path / "shards")
    writer.write(batch(["news", "news", "reviews"], ["房间很干净。", "one two", "服务很好"]))
    writer.write(batch(["reviews"], ["酒店不错"]))
    assert {name: (c.documents, c.characters) for name, c in writer.train_sources.items()} == {
        "news": (2, 13), "reviews": (2, 8)}
    with pytest.raises(CorpusError, match=r"^corpus\.sources\.news: its documents came back after another source's"):
        writer.write(batch(["news"], ["again"]))
