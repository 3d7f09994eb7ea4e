"""Packing, per-document splitting, collation and length bucketing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_mlm.config import SequenceConfig
from bert_mlm.core.tokens.sequences import (
    Collator,
    IndexedSequences,
    build_sequence_index,
    build_sequences,
    index_split,
    index_token_store,
    padded_length,
)
from bert_mlm.errors import UserError

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = [PAD, UNK, CLS, SEP, MASK]


def random_documents(n=200, seed=0, low=0, high=300):
    """Documents of ids 5..999 (never a special id), of varied lengths (empty ones included)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(5, 1000, size=int(rng.integers(low, high)), dtype=np.int32) for _ in range(n)]


def test_padded_length():
    assert [padded_length(n) for n in (1, 7, 8, 9, 16, 17)] == [8, 8, 8, 16, 16, 24]


# ----------------------------------------------------------------------------- packing
@pytest.mark.parametrize("max_length", [8, 64, 128, 129])
def test_pack_documents_loses_no_token(max_length):
    docs = random_documents()
    blocks = build_sequences(docs, "packed", max_length, CLS, SEP)
    assert all(b[0] == CLS for b in blocks)
    assert all(1 < len(b) <= max_length for b in blocks)
    assert all(len(b) == max_length for b in blocks[:-1])  # only the last block is shorter
    assert all(b.dtype == np.int32 for b in blocks)
    assert all(CLS not in b[1:] for b in blocks)
    expected = np.concatenate([np.append(d, SEP) for d in docs])
    np.testing.assert_array_equal(np.concatenate([b[1:] for b in blocks]), expected)


def test_pack_documents_small_cases():
    assert build_sequences([], "packed", 16, CLS, SEP) == []
    blocks = build_sequences([np.array([10, 11, 12], dtype=np.int32)], "packed", 16, CLS, SEP)
    assert [b.tolist() for b in blocks] == [[CLS, 10, 11, 12, SEP]]
    blocks = build_sequences([np.arange(10, 17, dtype=np.int32), np.array([20], dtype=np.int32)], "packed", 8, CLS,
                             SEP)
    assert [b.tolist() for b in blocks] == [
        [CLS, 10, 11, 12, 13, 14, 15, 16],
        [CLS, SEP, 20, SEP],
    ]


# ----------------------------------------------------------------------------- per-document splitting
@pytest.mark.parametrize("max_length", [8, 64, 128])
def test_split_documents_never_truncates(max_length):
    docs = random_documents()
    sequences = build_sequences(docs, "document", max_length, CLS, SEP)
    assert all(s[0] == CLS and s[-1] == SEP for s in sequences)
    assert all(3 <= len(s) <= max_length for s in sequences)
    recovered = np.concatenate([s[1:-1] for s in sequences])
    np.testing.assert_array_equal(recovered, np.concatenate(docs))
    # Each sequence holds tokens of one document only: the chunks of each document, in order.
    body = max_length - 2
    expected_count = sum(-(-len(d) // body) for d in docs if len(d))
    assert len(sequences) == expected_count


def test_split_documents_small_cases():
    docs = [np.array([], dtype=np.int32), np.arange(10, 16, dtype=np.int32), np.arange(20, 27, dtype=np.int32)]
    sequences = build_sequences(docs, "document", 8, CLS, SEP)
    assert [s.tolist() for s in sequences] == [
        [CLS, 10, 11, 12, 13, 14, 15, SEP],
        [CLS, 20, 21, 22, 23, 24, 25, SEP],
        [CLS, 26, SEP],
    ]


# ----------------------------------------------------------------------------- collation
def _sequences(max_length=128, seed=1):
    return build_sequences(random_documents(40, seed=seed, low=1, high=300), "document", max_length, CLS, SEP)


@pytest.mark.parametrize("padding", ["static", "dynamic"])
def test_collator_masks_and_padding(padding):
    sequences = _sequences()[:16]
    collator = Collator(PAD, SPECIALS, 128, padding=padding)
    batch = collator(sequences)
    input_ids, attention, special = batch["input_ids"], batch["attention_mask"], batch["special_tokens_mask"]
    assert input_ids.dtype == attention.dtype == special.dtype == torch.long
    assert input_ids.shape == attention.shape == special.shape
    lengths = torch.tensor([len(s) for s in sequences])
    longest = int(lengths.max())
    width = input_ids.shape[1]
    if padding == "static":
        assert width == 128
    else:
        assert width % 8 == 0 and longest <= width < longest + 8
    positions = torch.arange(width)[None, :]
    assert torch.equal(attention, (positions < lengths[:, None]).long())
    for row, seq in enumerate(sequences):
        assert input_ids[row, : len(seq)].tolist() == seq.tolist()
    assert not (input_ids[attention == 1] == PAD).any()  # documents hold no pad id
    assert (input_ids[attention == 0] == PAD).all()
    expected_special = (input_ids == CLS) | (input_ids == SEP) | (attention == 0)
    assert torch.equal(special.bool(), expected_special)
    assert special[:, 0].all()  # [CLS]


def test_collator_marks_padding_special_even_when_pad_id_is_not_listed():
    collator = Collator(PAD, [CLS, SEP], 16, padding="static")
    batch = collator([np.array([CLS, 5, 6, SEP], dtype=np.int32)])
    assert batch["special_tokens_mask"][0].tolist() == [1, 0, 0, 1] + [1] * 12
    assert batch["attention_mask"][0].tolist() == [1] * 4 + [0] * 12


def test_collator_dynamic_width_is_capped_at_max_length():
    collator = Collator(PAD, SPECIALS, 12, padding="dynamic")
    batch = collator([np.arange(5, 15, dtype=np.int32), np.array([CLS, 5], dtype=np.int32)])
    assert batch["input_ids"].shape == (2, 12)
    assert batch["attention_mask"].sum(dim=1).tolist() == [10, 2]


def test_collator_refuses_too_long_sequences():
    collator = Collator(PAD, SPECIALS, 16)
    with pytest.raises(ValueError, match="max_length"):
        collator([np.full(17, 7, dtype=np.int32)])


# ----------------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"max_length": 7}, "sequences.max_length"),
        ({"max_length": 0}, "sequences.max_length"),
        ({"max_length": 64.0}, "sequences.max_length"),
        ({"mode": "sliding"}, "sequences.mode"),
        ({"padding": "longest"}, "sequences.padding"),
    ],
)
def test_sequence_config_rejects_bad_values(kwargs, parameter):
    with pytest.raises(ValueError, match=parameter.replace(".", r"\.")):
        SequenceConfig(**kwargs)


def test_sequence_config_accepts_valid_values_and_must_fit_the_model():
    from bert_mlm.config import ExperimentConfig

    SequenceConfig(mode="document", padding="static", max_length=8)
    ExperimentConfig.from_parameters({"sequences": {"max_length": 512}, "model": {"max_position_embeddings": 512}})
    with pytest.raises(ValueError, match=r"sequences\.max_length.*model\.max_position_embeddings"):
        ExperimentConfig.from_parameters({"sequences": {"max_length": 513}, "model": {"max_position_embeddings": 512}})


# ----------------------------------------------------------------------------- the index over a token store
@pytest.mark.parametrize("mode", ["packed", "document"])
@pytest.mark.parametrize("max_length", [8, 64, 129])
def test_indexed_sequences_read_from_the_store_equal_the_built_ones(tmp_path, mode, max_length):
    from bert_mlm.core.tokens.token_store import TokenSplit

    docs = random_documents(300, seed=4)
    split = TokenSplit.from_documents(docs, SEP, dtype=np.uint16)
    indexed = IndexedSequences(split, index_split(split, mode, max_length), CLS, SEP)
    built = build_sequences(docs, mode, max_length, CLS, SEP)
    assert len(indexed) == len(built)
    np.testing.assert_array_equal(indexed.lengths, [len(s) for s in built])
    assert all(np.array_equal(indexed[i], built[i]) and indexed[i].dtype == np.int32 for i in range(len(built)))
    # Packed sequences are contiguous slices of the stream: the index holds no token.
    if mode == "packed":
        assert not indexed.index.add_sep.any()
    assert indexed[:5].lengths.tolist() == indexed.lengths[:5].tolist()


def test_index_refuses_another_store(tmp_path, tiny_tokenizer):
    from bert_mlm.core.tokens.token_store import write_token_store

    texts = [f"sentence number {i} with some words" for i in range(50)]
    store = write_token_store(tmp_path / "a", {"train": texts, "valid": texts[:5], "test": texts[:5]}, tiny_tokenizer)
    other = write_token_store(
        tmp_path / "b", {"train": texts[1:], "valid": texts[:5], "test": texts[:5]}, tiny_tokenizer
    )
    index = build_sequence_index(store, SequenceConfig(max_length=16), ("train", "valid", "test"))
    sequences = index.sequences(store, "train", CLS, SEP)
    assert sum(sequences.lengths) == store.split("train").num_tokens + len(sequences)
    with pytest.raises(ValueError, match="sequence_index: built on another token store"):
        index.sequences(other, "train", CLS, SEP)
    assert index.sequences(other, "valid", CLS, SEP).fingerprint == sequences_of(index, store, "valid").fingerprint


def sequences_of(index, store, split):
    return index.sequences(store, split, CLS, SEP)


def test_a_store_is_indexed_only_with_its_tokenizer_and_the_word_boundaries_asked_for(tmp_path, tiny_tokenizer):
    """The sequences stage refuses, in one line naming what to rerun, a store encoded with another
    vocabulary or one without the Chinese word boundaries whole-word masking needs; its recipe
    names the settings that make the index."""
    from bert_mlm.config import TokenizerConfig
    from bert_mlm.core.tokens.token_store import TokenStoreError, write_token_store
    from bert_mlm.core.tokens.tokenizer import train_wordpiece

    texts = ["酒店的房间很干净，服务也很好", "the room was clean and the staff kind"] * 20
    store = write_token_store(tmp_path / "s", {"train": texts, "valid": texts[:4], "test": texts[:4]}, tiny_tokenizer)
    index = index_token_store(store, tiny_tokenizer, SequenceConfig(max_length=16), "wordpiece", None)
    assert len(index.splits["train"]) > 0 and index.words is None
    longer = index_token_store(store, tiny_tokenizer, SequenceConfig(max_length=32), "wordpiece", None)
    assert index.recipe["max_length"] == 16 and longer.recipe != index.recipe
    with pytest.raises(UserError, match=r"masking\.whole_word: whole-word masking on jieba words .* holds no word "
                                        r"boundaries"):
        index_token_store(store, tiny_tokenizer, SequenceConfig(max_length=16), "jieba", "jieba")
    other = train_wordpiece(texts, TokenizerConfig(vocab_size=120, min_frequency=1, base_alphabet="none"))
    with pytest.raises(TokenStoreError, match="encoded with another vocabulary"):
        index_token_store(store, other, SequenceConfig(max_length=16), "wordpiece", None)


# ----------------------------------------------------------------------------- word starts (whole-word masking)
def test_collator_word_starts_from_hash_pieces_and_stored_bits():
    hashes = [10, 11]  # "##" pieces
    collator = Collator(PAD, SPECIALS, 16, whole_word=True, continuation_ids=hashes)
    rows = [np.array([CLS, 10, 5, 11, 6, 7, SEP], np.int32), np.array([CLS, 5, 6, SEP], np.int32)]
    stored = np.zeros((2, 16), bool)
    stored[0, 4] = True
    batch = collator(rows, stored)
    starts = batch["word_starts"]
    assert starts.shape == batch["input_ids"].shape and starts.dtype == torch.bool
    # [CLS] | ##10 (cut after [CLS]: starts a word) | 5 ##11 6 (stored: continues) | 7 | [SEP] | pads
    assert starts[0, :8].tolist() == [True, True, True, False, False, True, True, True]
    assert starts[1, :4].all()
    assert "word_starts" not in Collator(PAD, SPECIALS, 16)(rows)
    assert Collator(PAD, SPECIALS, 16, whole_word=True, continuation_ids=hashes)(rows)["word_starts"][0, 4]


def test_indexed_sequences_read_their_word_bits(tmp_path):
    from bert_mlm.core.tokens.token_store import TokenSplit
    from bert_mlm.core.tokens.words import BitWriter

    docs = random_documents(50, seed=9, low=1)
    split = TokenSplit.from_documents(docs, SEP, dtype=np.uint16)
    flags = np.random.default_rng(0).random(split.num_tokens) < 0.5
    writer = BitWriter(tmp_path / "bits")
    writer.write(flags)
    writer.close()
    bits = np.fromfile(tmp_path / "bits", dtype=np.uint8)
    for mode in ("packed", "document"):
        index = index_split(split, mode, 32)
        sequences = IndexedSequences(split, index, CLS, SEP, bits)
        matrix = sequences.continuations(range(len(sequences)), 32)
        for i in range(len(sequences)):
            got = matrix[i]
            start, count = int(index.starts[i]), int(index.counts[i])
            assert not got[0] and not got[1 + count :].any()  # [CLS], an added [SEP], padding
            assert np.array_equal(got[1 : 1 + count], flags[start : start + count])
        assert sequences[3:5].words is bits
        picked = [7, 0, len(sequences) - 1, 3]
        assert np.array_equal(sequences.continuations(picked, 32), matrix[picked])
