"""Labelled task files: formats, the hash split, label mapping, and every bad input refused in one
message before any model trains (English and Chinese)."""

from __future__ import annotations

import pandas as pd
import pytest

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.finetune.labelled import encode_examples, load_task, read_labelled
from bert_mlm.errors import UserError


def labelled_csv(tmp_path, rows, name="reviews.csv", columns=("label", "review")) -> str:
    path = tmp_path / name
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, index=False)
    return str(path)


def test_the_hash_split_is_disjoint_stable_and_capped(tmp_path):
    path = labelled_csv(tmp_path, [(i % 3, f"review number {i}") for i in range(1000)])
    source = FinetuneConfig(path, text_column="review", eval_fraction=0.25, max_train_examples=500)
    task = load_task(source)
    assert len(task.train) == 500 and 150 < len(task.evaluation) < 350
    assert not set(task.train["text"]) & set(task.evaluation["text"])
    again = load_task(source)
    assert list(again.train["text"]) == list(task.train["text"])
    assert list(again.evaluation["text"]) == list(task.evaluation["text"])
    shuffled = labelled_csv(tmp_path, [(i % 3, f"review number {i}") for i in reversed(range(1000))], "shuffled.csv")
    reordered = load_task(FinetuneConfig(shuffled, text_column="review", eval_fraction=0.25, max_train_examples=500))
    assert set(reordered.evaluation["text"]) == set(task.evaluation["text"]), (
        "the split follows the text, not the order"
    )


def test_labels_of_any_type_map_to_ids_in_a_natural_order(tmp_path):
    rows = [{"text": f"sentence {i}", "label": ["neg", "pos", "neutral"][i % 3]} for i in range(60)]
    path = tmp_path / "task.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    task = load_task(FinetuneConfig(str(path), eval_fraction=0.3))
    assert task.labels == ["neg", "neutral", "pos"]
    mapping = task.label_mapping()
    assert mapping["label_to_id"] == {"neg": 0, "neutral": 1, "pos": 2}
    assert sum(mapping["train_counts"].values()) == len(task.train)
    # Numbers in numeric order (2 before 10); a Parquet float 1.0 reads as a CSV's 1.
    numeric = tmp_path / "numeric.parquet"
    pd.DataFrame(
        {"text": [f"t {i}" for i in range(40)], "label": [float([2, 10][i % 2]) for i in range(40)]}
    ).to_parquet(numeric)
    assert load_task(FinetuneConfig(str(numeric), eval_fraction=0.3)).labels == ["2", "10"]


def test_text_pairs_are_encoded_with_segment_ids(tmp_path, tiny_tokenizer):
    rows = [(i % 2, f"the value {i}", f"a list {i}") for i in range(40)]
    path = labelled_csv(tmp_path, rows, "pairs.csv", ("label", "premise", "hypothesis"))
    task = load_task(FinetuneConfig(path, text_column="premise", pair_column="hypothesis", eval_fraction=0.3))
    assert "pair" in task.train
    encoded = encode_examples(task, task.train, tiny_tokenizer, max_length=64)
    ids, segments = encoded.input_ids[0], encoded.token_type_ids[0]
    assert ids.count(tiny_tokenizer.sep_token_id) == 2 and set(segments) == {0, 1}
    assert list(encoded.labels) == list(task.ids(task.train))


def test_a_missing_column_is_named_with_the_columns_there_are(shared_dir):
    dev = str(shared_dir / "corpora" / "sst2" / "dev.tsv")
    with pytest.raises(
        UserError,
        match=r"finetune\.text_column: .*dev\.tsv.*has no column 'sentence'; its columns are \['label', 'content'\]",
    ):
        read_labelled(dev, ("sentence",), "label", "finetune.eval_path")
    frame = read_labelled(dev, ("content",), "label", "finetune.eval_path")
    assert len(frame) == 872 and set(frame["label"]) == {"0", "1"}


def test_chinese_reviews_split_and_encode(shared_dir):
    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    reviews = str(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")
    task = load_task(FinetuneConfig(reviews, text_column="review", max_train_examples=300, max_eval_examples=200))
    assert task.labels == ["0", "1"] and len(task.train) == 300 and len(task.evaluation) == 200
    tokenizer = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")
    encoded = encode_examples(task, task.evaluation, tokenizer, max_length=128)
    assert max(len(ids) for ids in encoded.input_ids) <= 128
    unknown = sum(ids.count(tokenizer.unk_token_id) for ids in encoded.input_ids)
    assert unknown / sum(len(ids) for ids in encoded.input_ids) < 0.01


def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header_only = tmp_path / "header.csv"
    header_only.write_text("label,review\n")
    one_class = labelled_csv(tmp_path, [(1, f"很好 {i}") for i in range(50)], "one_class.csv")
    unseen_train = labelled_csv(tmp_path, [(i % 2, f"good {i}") for i in range(50)], "unseen_train.csv")
    unseen_eval = labelled_csv(tmp_path, [(i % 3, f"bad {i}") for i in range(30)], "unseen_eval.csv")
    every_row_a_class = labelled_csv(tmp_path, [(f"id-{i}", f"text {i}") for i in range(50)], "ids.csv")
    text = tmp_path / "notes.txt"
    text.write_text("no table here\n")
    return [
        (FinetuneConfig(str(empty), text_column="review"), r"finetune\.train_path: .*empty\.csv' is empty"),
        (
            FinetuneConfig(str(header_only), text_column="review"),
            r"finetune\.train_path: .*header\.csv' has no labelled rows",
        ),
        (
            FinetuneConfig(one_class, text_column="review"),
            r"finetune\.label_column: .*one_class\.csv.*has one class only \('1'\)",
        ),
        (
            FinetuneConfig(unseen_train, eval_path=unseen_eval, text_column="review"),
            r"finetune\.eval_path: 1 eval label\(s\) never occur among the training examples \('2'\)",
        ),
        (
            FinetuneConfig(every_row_a_class, text_column="review"),
            r"finetune\.label_column: .* classes among .* training examples",
        ),
        (
            FinetuneConfig(unseen_train, text_column="review", pair_column="hypothesis"),
            r"finetune\.pair_column: .* has no column 'hypothesis'",
        ),
        (FinetuneConfig(unseen_train, text_column="body"), r"finetune\.text_column: .* has no column 'body'"),
        (
            FinetuneConfig(unseen_train, text_column="review", label_column="stars"),
            r"finetune\.label_column: .* has no column 'stars'",
        ),
        (FinetuneConfig(str(text)), r"finetune\.train_path: .*notes\.txt' is not one of \.csv"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_bad_inputs_get_one_message_that_names_the_parameter(tmp_path, case):
    source, message = _bad_inputs(tmp_path)[case]
    with pytest.raises(UserError, match=message):
        load_task(source)


@pytest.mark.parametrize("language", ["English", "Chinese"])
def test_rows_without_a_label_or_a_text_are_counted_and_logged_when_dropped(tmp_path, caplog, language):
    text = "a fine stay" if language == "English" else "房间很大，床很舒服"
    rows = [(i % 2, f"{text} {i}") for i in range(50)] + [(None, f"{text} x"), (None, None), (1, None), (0, ""),
                                                          (1, "   "), (0, "\u3000")]  # spaces only: no text either
    path = labelled_csv(tmp_path, rows)
    with caplog.at_level("WARNING", logger="bert_mlm.core.finetune.labelled"):
        frame = read_labelled(path, ("review",), "label", "finetune.train_path")
    assert len(frame) == 50
    assert (f"finetune.train_path: 6 of 56 rows of '{path}' dropped: 2 without a label (column 'label'), 4 without "
            "a text ('review')") in caplog.text
    parquet = tmp_path / "rows.parquet"
    pd.DataFrame({"review": [f"{text} {i}" for i in range(10)] + ["  "], "label": [i % 2 for i in range(11)]}
                 ).to_parquet(parquet)
    assert len(read_labelled(str(parquet), ("review",), "label", "finetune.train_path")) == 10


@pytest.mark.parametrize("written", ["1.0/0.0 in a CSV", "floats in JSONL", "floats in Parquet"])
def test_labels_that_are_whole_numbers_read_as_integers(tmp_path, written):
    """Float labels became the classes "0.0"/"1.0" (a CSV of 1.0/0.0, as pandas writes a column that had a NaN)."""
    rows = {"text": [f"review {i}" for i in range(40)], "label": [float(i % 2) for i in range(40)]}
    if written == "1.0/0.0 in a CSV":
        path = tmp_path / "labels.csv"
        pd.DataFrame(rows).to_csv(path, index=False)
        assert "1.0" in path.read_text()
    elif written == "floats in JSONL":
        path = tmp_path / "labels.jsonl"
        pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    else:
        path = tmp_path / "labels.parquet"
        pd.DataFrame(rows).to_parquet(path)
    task = load_task(FinetuneConfig(str(path), eval_fraction=0.3))
    assert task.labels == ["0", "1"]
    # A column of real fractions keeps them.
    pd.DataFrame({"text": rows["text"], "label": [[0.5, 1.5][i % 2] for i in range(40)]}).to_csv(
        tmp_path / "fractions.csv", index=False)
    assert load_task(FinetuneConfig(str(tmp_path / "fractions.csv"), eval_fraction=0.3)).labels == ["0.5", "1.5"]
