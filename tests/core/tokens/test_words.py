"""Word boundaries for whole-word masking: segmenter choice, jieba flags, the stored bits, and
whole-word masks over a Chinese corpus's jieba words."""

from __future__ import annotations

import sys

import jieba
import numpy as np
import pandas as pd
import pytest
import torch

from bert_mlm.config import DataConfig, MaskingConfig, SequenceConfig
from bert_mlm.core.data.corpus import SPLITS, CleaningReport, RawText, clean_batch
from bert_mlm.core.data.documents import DocumentShards, DocumentShardWriter
from bert_mlm.core.model.masking import IGNORE_INDEX, mask_generator, mask_tokens
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.batches import batch_order
from bert_mlm.core.tokens.sequences import build_sequence_index
from bert_mlm.core.tokens.token_store import TokenStore, TokenStoreError, encode_texts
from bert_mlm.core.tokens.tokenization import EncodingJob
from bert_mlm.core.tokens.tokenizer import load_tokenizer
from bert_mlm.core.tokens.words import (
    BitWriter,
    continuation_ids,
    jieba_ascii_starts,
    resolve_segmenter,
    segment_texts,
    word_starts,
)


@pytest.fixture(scope="module")
def chinese_tokenizer(shared_dir):
    return load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")


@pytest.fixture(scope="module")
def reviews(shared_dir) -> list[str]:
    frame = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")
    return frame["review"].dropna().astype(str).tolist()


def test_auto_picks_rjieba_for_chinese_and_wordpiece_otherwise(reviews, monkeypatch):
    assert resolve_segmenter("auto", reviews[:50]) == "rjieba"
    assert resolve_segmenter("auto", ["The hotel was clean, 房间 small."] * 3) == "wordpiece"
    assert resolve_segmenter("auto", []) == "wordpiece"
    assert resolve_segmenter("jieba", ["English only"]) == "jieba"  # an explicit choice stands
    with pytest.raises(ValueError, match=r"masking\.word_segmenter: 'spaces'"):
        resolve_segmenter("spaces", [])
    monkeypatch.setitem(sys.modules, "rjieba", None)  # not installed: auto falls back to jieba
    assert resolve_segmenter("auto", reviews[:50]) == "jieba"


@pytest.fixture(scope="module")
def news(shared_dir) -> list[str]:
    lines = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


def test_rjieba_gives_jiebas_word_starts_on_both_chinese_corpora(reviews, news):
    """rjieba's starts equal jieba's (bench/word_segmenters.py measures every text; here a spread
    sample of each corpus, with the reviews that hold ASCII runs such as "24-26" or "xxx.com")."""
    ascii_runs = [t for t in reviews if any(mark in t for mark in ("-", ".com", "%"))][:200]
    for texts in (reviews[::40], ascii_runs, news[::200]):
        assert len(texts) > 100
        for text in texts:
            assert word_starts(text, "rjieba") == word_starts(text, "jieba"), text


@pytest.mark.parametrize(("word", "starts"), [
    ("24-26", [10, 12, 13]), ("hotel.com", [10, 15, 16]), ("3.5%", [10]), ("C++", [10]), ("...", [10]),
    ("non-smokers", [10, 13, 14]), ("abc", [10]),
])
def test_ascii_runs_are_cut_where_jieba_cuts_them(word, starts):
    assert jieba_ascii_starts(word, 10) == starts


def test_continuation_ids_are_the_hash_pieces():
    ids = continuation_ids({"[PAD]": 0, "run": 1, "##ning": 2, "#": 3, "##": 4, "##s": 5})
    assert ids.tolist() == [2, 5]


@pytest.mark.parametrize("chunks", [[3, 5, 8, 1], [16], [0, 7, 9, 13, 2]])
def test_bits_round_trip_whatever_the_chunk_sizes(tmp_path, chunks):
    rng = np.random.default_rng(sum(chunks))
    flags = rng.random(sum(chunks)) < 0.3
    writer = BitWriter(tmp_path / "bits")
    position = 0
    for size in chunks:
        writer.write(flags[position : position + size])
        position += size
    assert writer.close() == len(flags)
    bits = np.fromfile(tmp_path / "bits", dtype=np.uint8)
    assert len(bits) == (len(flags) + 7) // 8
    assert np.array_equal(np.unpackbits(bits, bitorder="little")[: len(flags)].astype(bool), flags)


@pytest.mark.parametrize("segmenter", ["rjieba", "jieba"])
def test_word_flags_follow_jiebas_words_and_keep_the_store_tokens(chinese_tokenizer, segmenter):
    texts = ["我们住的酒店很干净, unbelievable 好！", "", "早餐不错"]
    serialised = chinese_tokenizer.backend_tokenizer.to_str()
    sep = chinese_tokenizer.sep_token_id
    ids, lengths, flags = segment_texts(texts, serialised, sep, "uint16", segmenter)
    tokens, expected_lengths = encode_texts(texts, serialised, sep, "uint16")
    assert ids.tobytes() == tokens.tobytes()  # the same stream as the token store's (the empty text left out)
    assert np.array_equal(lengths, expected_lengths) and len(flags) == len(tokens)
    pieces = chinese_tokenizer.convert_ids_to_tokens(tokens.tolist())
    continued = {piece for piece, flag in zip(pieces, flags, strict=True) if flag}
    # jieba: 我们 / 住 / 的 / 酒店 / 很 / 干净 / ... / 早餐 / 不错
    assert {"们", "店", "净", "餐", "错"} <= continued
    assert not ({"我", "住", "的", "酒", "很", "干", "好", "早", "不", "[SEP]"} & continued)
    assert "##ble" in continued and "u" not in continued  # a WordPiece word inside Chinese text


def _shards(tmp_path, texts, ratios):
    """Reviews as document shards (one table row each, split by hash)."""
    writer = DocumentShardWriter(tmp_path / "documents", row_group_bytes=50_000)
    for start in range(0, len(texts), 1000):
        items = [RawText("reviews.csv", text, is_document=True) for text in texts[start : start + 1000]]
        writer.write(clean_batch(items, min_words=1, ratios=ratios))
    writer.close(CleaningReport(), {})
    return DocumentShards(tmp_path / "documents")


def _encoded_store(tmp_path, shards, tokenizer, segmenter="rjieba", workers=2):
    """The encoding stage's token store of ``shards``, with ``segmenter``'s word boundaries."""
    job = EncodingJob(shards, tokenizer.backend_tokenizer.to_str(), tokenizer.get_vocab(), tokenizer.sep_token_id,
                      DataConfig(workers=workers), word_segmenter=segmenter)
    job.write(tmp_path / "store")
    return TokenStore(tmp_path / "store")


@pytest.fixture(scope="module")
def segmented(tmp_path_factory, reviews, chinese_tokenizer):
    """ChnSentiCorp (every non-empty review) encoded with rjieba word bits, and its sequences."""
    tmp_path = tmp_path_factory.mktemp("segmented")
    shards = _shards(tmp_path, reviews, {"train": 0.8, "valid": 0.1, "test": 0.1})
    store = _encoded_store(tmp_path, shards, chinese_tokenizer)
    index = build_sequence_index(store, SequenceConfig(max_length=128), SPLITS, "rjieba", store_words=True)
    index.words = {split: np.fromfile(path, dtype=np.uint8) for split, (path, _) in index.word_files.items()}
    counts = {split: count for split, (_, count) in index.word_files.items()}
    return store, index, counts, shards


def test_the_encoding_pass_stores_the_same_tokens_with_their_word_bits(segmented, chinese_tokenizer, tmp_path):
    """One pass: the store with word bits holds the very tokens of a store encoded without them,
    and each split's bits are segment_texts' flags of its documents."""
    store, _, counts, shards = segmented
    plain = _encoded_store(tmp_path, shards, chinese_tokenizer, segmenter=None)
    assert plain.word_segmenter is None and store.word_segmenter == "rjieba" and store.word_scheme == 2
    serialised = chinese_tokenizer.backend_tokenizer.to_str()
    for split in SPLITS:
        assert store.digest(split) == plain.digest(split)
        texts = [text for batch in shards.iter_texts(split) for text in batch]
        tokens, _, flags = segment_texts(texts, serialised, chinese_tokenizer.sep_token_id, "uint16", "rjieba")
        assert counts[split] == len(tokens) == store.split(split).num_tokens
        path, _ = store.word_bits(split)
        stored = np.unpackbits(np.fromfile(path, dtype=np.uint8), bitorder="little")[: len(flags)].astype(bool)
        assert np.array_equal(stored, flags)


def test_truncated_word_bits_are_named(segmented, tmp_path):
    import shutil

    store, *_ = segmented
    copy = tmp_path / "store"
    shutil.copytree(store.directory, copy)
    path = copy / "valid.words.bits"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(TokenStoreError, match=r"valid\.words\.bits.*truncated"):
        TokenStore(copy)


def test_whole_word_masking_on_jieba_words_selects_the_target_share(segmented, chinese_tokenizer):
    store, index, counts, _ = segmented
    assert counts == {split: store.split(split).num_tokens for split in SPLITS}
    sequences = index.sequences(store, "train", chinese_tokenizer.cls_token_id, chinese_tokenizer.sep_token_id)
    ids = TokenIds.from_tokenizer(chinese_tokenizer)
    collator = ids.collator(128, whole_word=True)
    target = 0.15
    masking = MaskingConfig(target, whole_word=True)
    selected = maskable = multi_char_words = 0
    batches = batch_order(sequences.lengths, 32, torch.Generator().manual_seed(0), bucketed=True)
    for k in range(len(batches)):  # one whole epoch
        batch = collator.collate(sequences, batches[k])
        _, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement,
                                masking, mask_generator(0, 0, k), batch["word_starts"])
        chosen = labels != IGNORE_INDEX
        selected += int(chosen.sum())
        maskable += int((batch["special_tokens_mask"] == 0).sum())
        # Every word is all in or all out: a continuing piece follows its word's first piece.
        starts = batch["word_starts"]
        continuing = ~starts & (batch["special_tokens_mask"] == 0)
        multi_char_words += int(continuing.sum())
        previous = torch.roll(chosen, 1, dims=1)
        assert torch.equal(chosen[continuing], previous[continuing])
    assert multi_char_words > 0.3 * maskable  # jieba joined most characters into words
    assert abs(selected / maskable - target) < 0.01


def test_whole_word_pieces_share_one_fate(segmented, chinese_tokenizer):
    store, index, *_ = segmented
    sequences = index.sequences(store, "train", chinese_tokenizer.cls_token_id, chinese_tokenizer.sep_token_id)
    ids = TokenIds.from_tokenizer(chinese_tokenizer)
    batch = ids.collator(128, whole_word=True).collate(sequences, range(2000))
    masked, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement,
                                 MaskingConfig(0.4, whole_word=True), mask_generator(1, 0, 0), batch["word_starts"])
    chosen = labels != IGNORE_INDEX
    continuing = ~batch["word_starts"] & chosen
    fate = torch.where(masked == ids.mask, 0, torch.where(masked == batch["input_ids"], 2, 1))
    previous = torch.roll(fate, 1, dims=1)
    # The rare random draw that equals the original reads as "kept": allow that one in 10^4.
    agree = (fate[continuing] == previous[continuing]).float().mean()
    assert agree > 0.999 and int(continuing.sum()) > 10_000


def test_jieba_works_offline():
    assert jieba.lcut("我们住的酒店很干净") == ["我们", "住", "的", "酒店", "很", "干净"]


def test_stored_bits_name_their_segmenter_and_scheme(segmented, chinese_tokenizer):
    """Bits of one segmenter are never taken for another's: asking for jieba words on an rjieba
    index is refused, and the sequences' fingerprint (tuning studies, checkpoints) holds the scheme."""
    store, index, *_ = segmented
    index.check_words(True, "auto")
    index.check_words(True, "rjieba")
    with pytest.raises(ValueError, match="whole-word masking on jieba words needs word boundaries that sequence_index "
                                         "holds rjieba words"):
        index.check_words(True, "jieba")
    index.word_scheme = 2
    ids = chinese_tokenizer.cls_token_id, chinese_tokenizer.sep_token_id
    rjieba_bits = index.sequences(store, "train", *ids).fingerprint
    index.word_scheme = 1
    assert index.sequences(store, "train", *ids).fingerprint != rjieba_bits
