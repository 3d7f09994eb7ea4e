"""The downstream probe: labelled files, the hash split, and a probe that finds a signal only
where there is one."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from bert_mlm.core.model import ModelConfig, build_model
from bert_mlm.core.probe import ProbeConfig, probe_data, read_labelled, run_probe

from .conftest import synthetic_sentences


def _labelled_file(tmp_path, rows, name="reviews.csv"):
    path = tmp_path / name
    pd.DataFrame(rows, columns=["label", "review"]).to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module")
def model(tiny_tokenizer):
    config = ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    return build_model(config, tiny_tokenizer, seed=0)


def test_the_probe_finds_a_signal_only_where_there_is_one(tmp_path, tiny_tokenizer, model):
    rng = random.Random(0)
    sentences = synthetic_sentences(1200, seed=5)
    # The label is whether the sentence holds the word "error": mean-pooled vectors carry it,
    # even from a random encoder. Random labels carry nothing.
    marked = [s + (" error error" if i % 2 else " value value") for i, s in enumerate(sentences)]
    signal = _labelled_file(tmp_path, [(i % 2, s) for i, s in enumerate(marked)], "signal.csv")
    noise = _labelled_file(tmp_path, [(rng.randint(0, 1), s) for s in marked], "noise.csv")
    found = run_probe(model, tiny_tokenizer, ProbeConfig(train_path=signal, text_column="review"))
    assert found["probe_accuracy"] > 0.9 and found["probe_eval_examples"] > 150
    assert 0 < found["probe_accuracy_se"] < 0.03
    nothing = run_probe(model, tiny_tokenizer, ProbeConfig(train_path=noise, text_column="review"))
    assert abs(nothing["probe_accuracy"] - 0.5) < 4 * nothing["probe_accuracy_se"] + 0.02
    assert nothing["probe_majority_accuracy"] == pytest.approx(0.5, abs=0.1)


def test_the_hash_split_is_disjoint_stable_and_capped(tmp_path):
    path = _labelled_file(tmp_path, [(i % 3, f"review number {i}") for i in range(1000)])
    config = ProbeConfig(train_path=path, text_column="review", eval_fraction=0.25, max_train_examples=500)
    train, evaluation = probe_data(config)
    assert len(train) == 500 and 150 < len(evaluation) < 350
    assert not set(train["text"]) & set(evaluation["text"])
    again_train, again_eval = probe_data(config)
    assert list(again_train["text"]) == list(train["text"]) and list(again_eval["text"]) == list(evaluation["text"])


def test_a_missing_column_is_named_with_the_columns_there_are(shared_dir):
    dev = str(shared_dir / "corpora" / "sst2" / "dev.tsv")
    with pytest.raises(ValueError, match=r"probe\.text_column: .*dev\.tsv.*has no column 'sentence'; its columns are \['label', 'content'\]"):
        read_labelled(dev, "sentence", "label", "probe.eval_path")
    frame = read_labelled(dev, "content", "label", "probe.eval_path")
    assert len(frame) == 872 and set(frame["label"]) == {"0", "1"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"train_path": "/nonexistent.csv"}, r"probe\.train_path: '/nonexistent\.csv' is not a file"),
    ({"eval_fraction": 1.0}, r"probe\.eval_fraction"),
    ({"max_train_examples": 0}, r"probe\.max_train_examples"),
])
def test_bad_probe_parameters_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ProbeConfig(**kwargs)
