"""Words and tags to WordPiece pieces and back: the first piece carries the tag (or every piece,
I- after a B- word's first), words cut by max_length, without pieces, or [UNK] are counted."""

from __future__ import annotations

import numpy as np
import pytest

from bert_mlm.core.finetune.alignment import IGNORED, align
from bert_mlm.core.tokens.tokenizer import load_tokenizer

LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
ID = {label: index for index, label in enumerate(LABELS)}


@pytest.fixture(scope="module")
def chinese(shared_dir):
    return load_tokenizer(shared_dir / "vocab/bert-base-chinese.vocab.txt")


@pytest.fixture(scope="module")
def english(shared_dir):
    return load_tokenizer(shared_dir / "vocab/bert-base-uncased.vocab.txt")


def ids(tags: list[str]) -> list[int]:
    return [ID[tag] for tag in tags]


def test_a_chinese_character_is_one_word_and_one_piece(chinese):
    tokens = [list("张三在北京工作。")]
    tags = ids(["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "O"])
    aligned = align(tokens, [tags], LABELS, chinese, max_length=32)
    assert chinese.convert_ids_to_tokens(aligned.input_ids[0]) == ["[CLS]", *tokens[0], "[SEP]"]
    assert aligned.labels[0] == [IGNORED, *tags, IGNORED]
    assert aligned.first_pieces[0].tolist() == list(range(1, 9))
    assert aligned.report.words == 8 and aligned.report.unknown == aligned.report.truncated == 0


def test_the_first_piece_carries_the_tag_or_every_piece_with_i_after_b(english):
    tokens = [["Huggingface", "hired", "Johanson", "in", "Paris"]]  # hugging ##face, johan ##son
    tags = ids(["B-ORG", "O", "B-PER", "O", "B-LOC"])
    first = align(tokens, [tags], LABELS, english, max_length=32)
    assert english.convert_ids_to_tokens(first.input_ids[0]) == [
        "[CLS]", "hugging", "##face", "hired", "johan", "##son", "in", "paris", "[SEP]"]
    assert first.labels[0] == [IGNORED, ID["B-ORG"], IGNORED, ID["O"], ID["B-PER"], IGNORED, ID["O"], ID["B-LOC"],
                               IGNORED]
    assert first.first_pieces[0].tolist() == [1, 3, 4, 6, 7]
    every = align(tokens, [tags], LABELS, english, max_length=32, label_all_pieces=True)
    assert every.labels[0] == [IGNORED, ID["B-ORG"], ID["I-ORG"], ID["O"], ID["B-PER"], ID["I-PER"], ID["O"],
                               ID["B-LOC"], IGNORED]
    # 北京 as one word: two pieces, the second an I-LOC when every piece is labelled.
    beijing = align([["在", "北京"]], [ids(["O", "B-LOC"])], LABELS, english, 8, label_all_pieces=True)
    assert beijing.labels[0] == [IGNORED, ID["O"], ID["B-LOC"], ID["I-LOC"], IGNORED]


def test_words_cut_off_or_without_pieces_are_counted_and_predicted_o(chinese, english):
    sentences = [list("中华人民共和国成立了"), list("今天")]
    tags = [ids(["B-LOC"] + ["I-LOC"] * 6 + ["O"] * 3), ids(["O", "O"])]
    aligned = align(sentences, tags, LABELS, chinese, max_length=6)  # [CLS] + 4 characters + [SEP]
    report = aligned.report
    assert (report.words, report.truncated, report.truncated_sentences, report.without_pieces) == (12, 6, 1, 0)
    assert aligned.first_pieces[0].tolist() == [1, 2, 3, 4, -1, -1, -1, -1, -1, -1]
    # Predictions come back per word: a cut-off word is O (label 0), so its gold entity counts as missed.
    pieces = [np.array([0, 1, 2, 2, 2, 0]), np.array([0, 5, 6, 0])]
    assert aligned.word_predictions(pieces, 0).tolist() == [1, 2, 2, 2, 0, 0, 0, 0, 0, 0, 5, 6]
    # A lone space or a zero-width space tokenizes to nothing: no piece, not truncation.
    spaced = align([["Peter", " ", "Blackburn", "\u200b"]], [ids(["B-PER", "O", "I-PER", "O"])], LABELS, english, 32)
    assert spaced.first_pieces[0].tolist() == [1, -1, 2, -1]
    assert (spaced.report.without_pieces, spaced.report.truncated) == (2, 0)
    assert "2 without any piece (predicted O)" in spaced.report.describe("eval")


def test_a_latin_vocabulary_on_chinese_says_how_much_is_unknown(chinese, english):
    tokens = [list("张三在北京工作。")]
    tags = [ids(["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "O"])]
    latin = align(tokens, tags, LABELS, english, 32).report
    assert latin.unknown == 4 and latin.unknown_rate == 0.5  # 张 在 工 作: not in bert-base-uncased
    assert "4 (50.0 %) are [UNK] to the model's vocabulary" in latin.describe("eval")
    assert align(tokens, tags, LABELS, chinese, 32).report.unknown == 0
