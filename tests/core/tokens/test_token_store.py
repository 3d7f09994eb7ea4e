"""The memory-mapped token store: layout, reader, dtype rule, damaged or foreign files named,
and the same token ids as encoding the corpus in memory (English and Chinese)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest

from bert_mlm.config import CorpusConfig, DataConfig, SequenceConfig
from bert_mlm.core.data.corpus import SPLITS, CorpusError, clean_documents
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.sources import CorpusSource, read_corpus
from bert_mlm.core.tokens.sequences import build_sequence_index
from bert_mlm.core.tokens.token_store import (
    TokenSplit,
    TokenStore,
    TokenStoreError,
    token_dtype,
    token_store_stats,
    write_token_store,
)
from bert_mlm.core.tokens.tokenization import EncodingJob
from bert_mlm.core.tokens.tokenizer import encode_documents, load_tokenizer
from bert_mlm.core.train.experiment import open_sequences
from tests.core.conftest import synthetic_sentences


@pytest.fixture
def store(tmp_path, tiny_tokenizer):
    texts = synthetic_sentences(600, seed=3)
    return write_token_store(tmp_path / "store", {"train": texts[:500], "valid": texts[500:550], "test": texts[550:]},
                             tiny_tokenizer), texts


def test_layout_and_reader(store, tiny_tokenizer):
    store, texts = store
    train = store.split("train")
    expected = encode_documents(tiny_tokenizer, texts[:500])
    assert len(train) == 500 and store.dtype == np.uint16
    assert all(np.array_equal(train.document(i), expected[i]) for i in range(500))
    # The stream: every document followed by one [SEP]; offsets are document starts.
    sep = tiny_tokenizer.sep_token_id
    assert train.num_tokens == sum(len(d) + 1 for d in expected)
    assert (train.tokens[train.offsets[1:] - 1] == sep).all()
    assert train.tokens[: len(expected[0]) + 1].tolist() == [*expected[0].tolist(), sep]
    assert isinstance(train.tokens, np.memmap)
    np.testing.assert_array_equal(train.counts, np.bincount(train.tokens, minlength=len(tiny_tokenizer)))
    assert (store.directory / "train.bin").stat().st_size == 2 * train.num_tokens  # 2 bytes a token
    stats = token_store_stats(store, tiny_tokenizer.unk_token_id, len(tiny_tokenizer)).set_index("split")
    assert stats.loc["all", "documents"] == 600 and stats.loc["all", "unknown_rate"] < 0.01
    assert stats.loc["train", "tokens"] == sum(len(d) for d in expected)


def test_token_dtype_rule():
    assert token_dtype(8192) == np.uint16 and token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.int32 and token_dtype(250_000) == np.int32


def test_splits_travel_to_workers_as_a_path(store):
    store, _ = store
    train = store.split("train")
    payload = pickle.dumps(train)
    assert len(payload) < 1000 < train.tokens.nbytes
    again = pickle.loads(payload)
    np.testing.assert_array_equal(again.tokens, train.tokens)
    in_memory = TokenSplit.from_documents([np.array([5, 6]), np.array([7])], separator_id=3)
    assert in_memory.tokens.tolist() == [5, 6, 3, 7, 3] and in_memory.document(1).tolist() == [7]
    assert pickle.loads(pickle.dumps(in_memory)).tokens.tolist() == [5, 6, 3, 7, 3]


def test_truncated_and_foreign_files_are_named(store, shared_data):
    store, _ = store
    path = store.directory / "train.bin"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(
        TokenStoreError, match=r"token_store: '.*train\.bin' holds \d+ bytes where its manifest expects \d+"
    ):
        TokenStore(store.directory)
    path.unlink()
    with pytest.raises(TokenStoreError, match=r"token_store: '.*train\.bin' is missing"):
        TokenStore(store.directory)
    (store.directory / "manifest.json").unlink()
    with pytest.raises(CorpusError, match=r"token_store: .*manifest\.json. is missing"):
        TokenStore(store.directory)


def test_a_store_refuses_another_tokenizer(store, shared_data):
    store, _ = store
    other = load_tokenizer(shared_data / "vocab" / "bert-base-uncased.vocab.txt")
    with pytest.raises(TokenStoreError, match="another vocabulary"):
        store.check_tokenizer(other.get_vocab())


@pytest.mark.parametrize(
    ("corpus", "column", "vocab"),
    [
        ("gutenberg", "text", "bert-base-uncased.vocab.txt"),
        ("chnsenticorp/ChnSentiCorp_htl_all.csv", "review", "bert-base-chinese.vocab.txt"),
    ],
)
def test_streamed_store_has_the_token_ids_of_the_in_memory_path(shared_data, tmp_path, corpus, column, vocab):
    """Streaming (small chunks, shards, the store) changes nothing: the same documents in the same
    splits, and the same token ids as cleaning and encoding the corpus whole, in memory."""
    path = shared_data / "corpora" / corpus
    if corpus == "gutenberg":
        # Four of its books (1.9 of 5.9 MB: the whole directory took ~4 s more, twice encoded, for nothing more
        # to check): LF and CRLF (Moby Dick), files of many chunks and of one, in a directory of several.
        path = tmp_path / "gutenberg"
        path.mkdir()
        for name in ("austen-persuasion.txt", "blake-poems.txt", "melville-moby_dick.txt", "shakespeare-macbeth.txt"):
            (path / name).symlink_to(shared_data / "corpora" / corpus / name)
    tokenizer = load_tokenizer(shared_data / "vocab" / vocab)
    data = DataConfig(workers=2, chunk_bytes=1 << 18)
    DocumentStream(CorpusSource(str(path), column), CorpusConfig(min_words=2), data).write(tmp_path / "documents")
    shards = DocumentShards(tmp_path / "documents")
    EncodingJob(shards, tokenizer.backend_tokenizer.to_str(), tokenizer.get_vocab(), tokenizer.sep_token_id,
                data).write(tmp_path / "store")
    store = TokenStore(tmp_path / "store")
    documents, _ = clean_documents(read_corpus(path, column), min_words=2, ratios=CorpusConfig().split_ratios)
    for split in SPLITS:
        texts = documents.loc[documents["split"] == split, "text"].tolist()
        expected = encode_documents(tokenizer, texts)
        got = store.split(split)
        assert len(got) == len(expected) > 0
        assert all(np.array_equal(got.document(i), expected[i]) for i in range(len(expected))), split
    unknown = (
        token_store_stats(store, tokenizer.unk_token_id, len(tokenizer)).set_index("split").loc["all", "unknown_rate"]
    )
    assert unknown < 0.01
    assert pd.Series(store.manifest["splits"]).map(lambda s: s["documents"]).sum() == len(documents)


def test_documents_without_any_token_are_left_out(tmp_path, tiny_tokenizer):
    from bert_mlm.core.tokens.token_store import encode_texts

    texts = ["Return the value.", "\u200b\u200b\u200b", "A new list."]
    tokens, lengths = encode_texts(
        texts, tiny_tokenizer.backend_tokenizer.to_str(), tiny_tokenizer.sep_token_id, "uint16"
    )
    assert len(lengths) == 2 and (tokens == tiny_tokenizer.sep_token_id).sum() == 2
    store = write_token_store(tmp_path / "s", {"train": texts}, tiny_tokenizer)
    assert len(store.split("train")) == 2
    # A tokenizer once called with padding and truncation (fill-mask, the probe) keeps that state
    # in its backend: the store still holds whole, unpadded documents.
    tiny_tokenizer(["a b"], padding="max_length", truncation=True, max_length=3)
    padded_state = tiny_tokenizer.backend_tokenizer.to_str()
    tiny_tokenizer(["a b"])  # back to the shared fixture's plain state
    assert (
        encode_texts(texts * 5, padded_state, tiny_tokenizer.sep_token_id, "uint16")[1].tolist() == lengths.tolist() * 5
    )


@pytest.mark.parametrize(
    ("new_id", "message"),
    [
        (None, r"'.*train\.bin' \(the train split\) does not match the digest in its manifest"),
        (0xFFFF, r"'.*train\.bin' \(the train split\) holds token id 65535, outside the vocabulary of \d+ ids"),
    ],
    ids=["another valid id", "past the vocabulary"],
)
def test_a_changed_token_is_refused_before_training_reads_it(store, tiny_tokenizer, new_id, message):
    store, _ = store
    index = build_sequence_index(store, SequenceConfig(max_length=32), SPLITS)
    assert set(open_sequences(store, index, tiny_tokenizer)) == set(SPLITS)  # intact: opens
    tokens = np.fromfile(store.directory / "train.bin", dtype=store.dtype)
    position = len(tokens) // 2
    tokens[position] = new_id if new_id is not None else (int(tokens[position]) + 1) % len(tiny_tokenizer)
    tokens.tofile(store.directory / "train.bin")  # same size: the open-time checks pass
    with pytest.raises(TokenStoreError, match=message):
        open_sequences(TokenStore(store.directory), index, tiny_tokenizer)


@pytest.mark.parametrize("legacy", [False, True], ids=["with its digest", "a store from before the digest"])
def test_changed_document_offsets_are_one_line_before_anything_indexes_by_them(store, tiny_tokenizer, legacy):
    """The .idx offsets are covered too: a changed offset was a 98-line traceback in sequences.mode=document."""
    store, _ = store
    if legacy:  # stores written before the offsets' digest: their offsets are checked for order
        manifest = json.loads((store.directory / "manifest.json").read_text())
        del manifest["splits"]["train"]["offsets_digest"]
        (store.directory / "manifest.json").write_text(json.dumps(manifest))
    TokenStore(store.directory).verify_offsets("train")  # intact: passes
    offsets = np.fromfile(store.directory / "train.idx", dtype=np.int64)
    offsets[len(offsets) // 2] = offsets[-1] + 1000  # past the stream, out of order
    offsets.tofile(store.directory / "train.idx")
    message = r"'.*train\.idx' \(the train split's document offsets\) does not match its manifest"
    with pytest.raises(TokenStoreError, match=message):
        TokenStore(store.directory).verify_offsets("train")
    with pytest.raises(TokenStoreError, match=message):
        open_sequences(TokenStore(store.directory), build_sequence_index(store, SequenceConfig(max_length=32), SPLITS),
                       tiny_tokenizer)
