"""Bad inputs: each gets a clear error (naming the parameter or file) or a documented recovery,
and a failed run leaves no output behind."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pandas as pd
import pytest
from kedro.io import DatasetError
from kedro.io.core import Version

from bert_mlm.config import SECTIONS
from bert_mlm.core.data.corpus import CorpusError, RawText, clean_documents
from bert_mlm.core.data.sources import CorpusSource
from bert_mlm.datasets.corpus import CorpusDataset
from bert_mlm.datasets.data import DocumentShardsDataset
from bert_mlm.pipelines.ingestion.nodes import clean_and_split_corpus, summarise_corpus

PARAMS = {"min_words": 4}
TRAIN_ONLY = {"split_ratios": {"train": 1.0, "valid": 0.0, "test": 0.0}}  # a tiny corpus: no held-out split asked for


def ingest(path: Path, corpus: dict | None = None, **params) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ingestion node and its catalog dataset, as a run does them: documents and stats."""
    stream = clean_and_split_corpus(
        CorpusDataset(path=str(path), **params).load(),
        SECTIONS["corpus"].build({**PARAMS, **(corpus or {})}),
        SECTIONS["data"].build({"workers": 1}),
    )
    dataset = DocumentShardsDataset(
        filepath=str(path.parent / f"shards-{time.monotonic_ns()}"), version=Version(None, None)
    )
    dataset.save(stream)
    shards = dataset.load()
    return shards.frame(), summarise_corpus(shards)


def test_missing_path(tmp_path):
    with pytest.raises((CorpusError, DatasetError), match=r"corpus\.path: '.*nowhere' does not exist"):
        ingest(tmp_path / "nowhere")


def test_empty_file(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises((CorpusError, DatasetError), match=r"^corpus\.path: the corpus is empty after cleaning"):
        ingest(tmp_path / "empty.txt")


def test_binary_file_is_named(tmp_path):
    (tmp_path / "model.txt").write_bytes(b"PK\x03\x04\x00\x00binary" * 100)  # a zip archive: said so
    with pytest.raises((CorpusError, DatasetError), match=r"corpus file '.*model\.txt' is a zip archive, not text"):
        ingest(tmp_path / "model.txt")
    (tmp_path / "data.txt").write_bytes(b"\x00\x01\x02\x03binary" * 100)
    with pytest.raises((CorpusError, DatasetError), match=r"corpus file '.*data\.txt' looks binary"):
        ingest(tmp_path / "data.txt")


def test_non_utf8_text_is_recovered_and_counted(tmp_path):
    text = "Caf\u00e9 society met on the boulevard every single evening of the year.\n\nAnother paragraph here."
    (tmp_path / "latin1.txt").write_bytes(text.encode("latin-1"))
    documents, stats = ingest(tmp_path / "latin1.txt", corpus=TRAIN_ONLY)
    assert stats.loc[stats["split"] == "all", "replaced_bytes"].item() == 1  # the é
    assert documents["text"].str.contains("Caf\ufffd society").any()


def test_a_line_of_many_megabytes_without_newline_becomes_bounded_documents(tmp_path):
    """16 MB in one line, read in 1 MB chunks (the stream cuts a paragraph longer than 4 chunks at a
    space, as it cuts a 100 MB line at the default 8 MB), then cut into documents of at most 1,000
    characters: 16,000 cuts, so a cut that copied the rest of the line (quadratic: ~128 GB copied)
    could not finish in time, while one pass takes about a second."""
    path = tmp_path / "one-line.txt"
    word = b"lorem ipsum dolor sit amet "
    path.write_bytes(word * (16 * 2**20 // len(word)))
    started = time.perf_counter()
    items = [item for batch in CorpusSource(str(path)).batches(chunk_bytes=1 << 20) for item in batch]
    assert len(items) >= 4  # cut inside the line by the stream
    documents, report = clean_documents(items, min_words=4, deduplicate=False, max_chars=1_000)
    assert time.perf_counter() - started < 120
    assert len(documents) > 16_000
    assert documents["text"].str.len().max() <= 1_000
    assert documents["text"].str.len().sum() > 0.99 * path.stat().st_size


def test_table_without_the_text_column(tmp_path):
    pd.DataFrame({"body": ["some text long enough to keep around"]}).to_parquet(tmp_path / "rows.parquet")
    with pytest.raises(
        (CorpusError, DatasetError), match=r"corpus\.text_column: column 'text' does not exist in '.*rows\.parquet'"
    ):
        ingest(tmp_path / "rows.parquet")
    documents, _ = ingest(tmp_path / "rows.parquet", corpus=TRAIN_ONLY, text_column="body")
    assert documents["text"].tolist() == ["some text long enough to keep around"]


def test_corpus_without_any_training_document(tmp_path):
    # One document that hashes into valid/test: nothing to train on.
    for salt in range(100):
        text = f"A lone paragraph of sufficient length number {salt}."
        documents, _ = clean_documents([RawText("x", text)], min_words=2, ratios={"train": 0.9, "valid": 0.05,
                                                                                  "test": 0.05})
        if documents["split"].tolist() != ["train"]:
            break
    (tmp_path / "tiny.txt").write_text(text)
    with pytest.raises((CorpusError, DatasetError), match=r"^corpus\.path: the corpus is too small"):
        ingest(tmp_path / "tiny.txt")


def test_resume_from_a_checkpoint_of_another_shape(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "train"))
    from test_loop import repetitive_sequences, setup

    from bert_mlm.config import MaskingConfig, ModelConfig
    from bert_mlm.core.model.bert import build_model
    from bert_mlm.core.train.loop import train

    model, ids, config, collator = setup(checkpoint_every=2, checkpoint_dir=str(tmp_path), max_steps=2)
    train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    _, ids, config, collator = setup(checkpoint_every=2, checkpoint_dir=str(tmp_path), max_steps=4, resume=True)
    wider = build_model(ModelConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=32), model_tokenizer(), seed=0)
    with pytest.raises(
        ValueError,
        match=r"training\.resume: no checkpoint of this run .*step-00000002' is another run's; "
        r"what differs: .*model\.hidden_size 32 -> 64",
    ):
        train(wider, repetitive_sequences(), ids, MaskingConfig(), config, collator)


def model_tokenizer():
    class Tiny:
        pad_token_id = 0

        def __len__(self):
            return 64

    return Tiny()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "word", "word"], r"1 duplicate token\(s\), e\.g\. \['word'\]"),
        (["[PAD]", "[UNK]", "[CLS]", "word"], r"lacks the special token\(s\) \['\[SEP\]', '\[MASK\]'\]"),
        (["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]", "word"], r"\[PAD\] must be id 0"),
    ],
)
def test_bad_vocabulary_files(tmp_path, lines, message):
    from bert_mlm.core.tokens.tokenizer import VocabularyError
    from bert_mlm.pipelines.tokenization.nodes import build_tokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"tokenizer\.vocab_path: .*" + message):
        build_tokenizer(
            None, SECTIONS["tokenizer"].build({"vocab_path": str(vocab)}), SECTIONS["model"].build({})
        )  # no documents are read for a given vocabulary


# ----------------------------------------------------------------------------- cases 4, 5 and 7
PARAGRAPH = "The quick brown fox jumps over the lazy dog number {} while the river keeps running."


def write_paragraphs(path: Path, count: int, offset: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(PARAGRAPH.format(offset + i) for i in range(count)))


def test_a_symlinked_subdirectory_is_read_and_a_symlink_loop_is_not_followed(tmp_path, caplog):
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    write_paragraphs(corpus / "own.txt", 200)
    write_paragraphs(elsewhere / "linked.txt", 200, offset=1000)
    (corpus / "more").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "back").symlink_to(corpus, target_is_directory=True)  # a loop: corpus/more/back -> corpus
    with caplog.at_level("INFO", logger="bert_mlm.core.data.sources"):
        documents, stats = ingest(corpus)
    sources = set(documents["source"])
    assert any(s.endswith("own.txt") for s in sources) and any(s.endswith("linked.txt") for s in sources)
    assert len(documents) == 400  # each file once, the loop not followed
    assert re.search(r"1 corpus file\(s\) in .*more \(symlink to .*elsewhere\)", caplog.text)
    assert "a symlink loop" in caplog.text


def paragraphs(language: str, count: int, shared: Path) -> list[str]:
    """``count`` distinct paragraphs: generated English, or real Chinese hotel reviews."""
    if language == "english":
        return [PARAGRAPH.format(i) for i in range(count)]
    reviews = pd.read_csv(shared / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"].dropna()
    reviews = reviews.str.replace(r"\s+", "", regex=True).drop_duplicates()
    return reviews[reviews.str.len() >= 30].head(count).tolist()


@pytest.mark.parametrize("language", ["english", "chinese"])
def test_nul_bytes_are_treated_the_same_wherever_they_are(tmp_path, shared_data, language):
    texts = paragraphs(language, 3000, shared_data)
    head = "\n\n".join(texts).encode()
    early = head[:100] + b"\x00" + head[100:]  # in Chinese, inside a 3-byte character
    late = head[:-100] + b"\x00" + head[-100:]  # past the first 64 KiB
    assert len(head) > 200_000
    results = []
    for name, data in (("early.txt", early), ("late.txt", late)):
        (tmp_path / name).write_bytes(data)
        documents, stats = ingest(tmp_path / name)
        results.append((len(documents), stats.loc[stats["split"] == "all", "replaced_bytes"].item()))
        assert not documents["text"].str.contains("\x00").any()
        assert not documents["text"].str.contains("\ufffd").any()  # the removed NUL split no character
    assert results[0] == results[1] == (len(texts), 1)


@pytest.mark.parametrize("language", ["english", "chinese"])
def test_a_malformed_jsonl_line_is_reported_by_its_number(tmp_path, shared_data, language):
    lines = [json.dumps({"text": text}, ensure_ascii=False) for text in paragraphs(language, 50, shared_data)]
    lines[36] = '{"text": "unterminated'
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines))
    with pytest.raises((CorpusError, DatasetError), match=r"corpus file '.*corpus\.jsonl', line 37: not valid JSON"):
        ingest(tmp_path / "corpus.jsonl", text_column="text")


def test_a_file_name_that_is_not_utf8_is_read_and_named_printably(tmp_path):
    directory = tmp_path / "corpus"
    directory.mkdir()
    name = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: not valid UTF-8
    write_paragraphs(directory / name, 200)
    documents, _ = ingest(directory)
    assert len(documents) == 200
    assert set(documents["source"]) == {str(directory / "caf\\xe9.txt")}


@pytest.mark.parametrize("text", [
    "word " * 30_000,  # one very long paragraph: a handful of documents, all in one split or two
    "\n".join("short line" for _ in range(20)),  # hard-wrapped short lines: one small paragraph
], ids=["one long paragraph", "hard-wrapped short lines"])
def test_a_corpus_without_held_out_documents_stops_at_ingestion(tmp_path, text):
    (tmp_path / "corpus.txt").write_text(text)
    with pytest.raises(
        (CorpusError, DatasetError),
        match=r"corpus\.path: (none of the corpus's \d+ document\(s\) landed in the (valid|test) split "
        r"\(corpus\.split_ratios\.(valid|test)=0\.05\), which (tuning|evaluation) needs|the corpus is too small)",
    ):
        ingest(tmp_path / "corpus.txt")


def test_corpus_stats_give_the_cleaning_totals_once(tmp_path):
    text = "Caf\u00e9 society met on the boulevard every single evening of the year.\n\nshort\n\n" * 2
    (tmp_path / "latin1.txt").write_bytes(text.encode("latin-1"))
    _, stats = ingest(tmp_path / "latin1.txt", corpus=TRAIN_ONLY)
    totals = stats.set_index("split")[["replaced_bytes", "duplicates_dropped", "short_dropped"]]
    assert totals.loc["all"].tolist() == [2, 1, 2]
    assert totals.drop(index="all").isna().all().all()  # not repeated on the split rows
    from bert_mlm.core.record.report import table

    for shown in (
        stats,
        pd.read_csv(pd.io.common.StringIO(stats.to_csv(index=False))),
    ):  # in memory, and as the report reads it
        html = table(shown)
        assert "<td>2</td>" in html and "<NA>" not in html and "&lt;NA&gt;" not in html and "2.0000" not in html
