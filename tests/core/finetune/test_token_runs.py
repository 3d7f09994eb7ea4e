"""Token-classification fine-tuning on real MSRA sentences with a tiny model: the loss falls and the
entity F1 leaves 0, the baseline gets the same seeds, head and batches, a seed gives the same run
twice, and a kept tagger works in a plain ``transformers`` pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

from bert_mlm.config import FinetuneConfig, ModelConfig
from bert_mlm.core.finetune.alignment import align
from bert_mlm.core.finetune.runs import BASELINE, PRETRAINED, starting_point
from bert_mlm.core.finetune.tagger import predict_tags
from bert_mlm.core.finetune.token_runs import evaluate_token_finetuning, prepare_tagging
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.tokens.tokenizer import load_tokenizer

TINY = ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=128)


@pytest.fixture(scope="module")
def tokenizer(shared_dir):
    return load_tokenizer(shared_dir / "vocab/bert-base-chinese.vocab.txt")


@pytest.fixture(scope="module")
def model(tokenizer):
    return build_model(TINY, tokenizer, seed=3)


@pytest.fixture(scope="module")
def config(shared_dir) -> FinetuneConfig:
    return FinetuneConfig(train_path=str(shared_dir / "corpora/msra-ner/ner_train.conll"), max_train_examples=400,
                          max_eval_examples=150, epochs=3, seeds=1, learning_rate=5e-3, max_length=64, progress=False,
                          task="token", save_model=True)  # a tagger is kept whatever finetune.pooling says


@pytest.fixture(scope="module")
def prepared(config, tokenizer):
    return prepare_tagging(config, tokenizer, TINY.max_position_embeddings)


@pytest.fixture(scope="module")
def result(model, tokenizer, config, prepared):
    baseline, name = starting_point(config, model, tokenizer, init_from=None, init_seed=11)
    return evaluate_token_finetuning(model, tokenizer, config, baseline=baseline, baseline_name=name, device="cpu",
                                     prepared=prepared)


def test_the_tagger_learns_and_its_baseline_is_paired(result):
    runs = result.runs
    assert {"eval_f1_LOC", "eval_f1_ORG", "eval_f1_PER"} <= set(runs.columns)
    assert runs["epoch"].tolist() == [0, 1, 2, 3] * 2, "epoch 0: the linear-probe head before fine-tuning"
    for _, rows in runs[runs["epoch"] > 0].groupby("model"):
        assert rows["train_loss"].iloc[-1] < rows["train_loss"].iloc[0]
        assert rows["eval_entity_f1"].iloc[-1] > 0
    pretrained, baseline = (runs[(runs["model"] == name) & (runs["epoch"] > 0)] for name in (PRETRAINED, BASELINE))
    assert pretrained["data_order"].tolist() == baseline["data_order"].tolist()  # the same batches in the same order
    assert runs["reported"].tolist() == [False, False, False, True] * 2


def test_the_metrics_pair_the_models_with_an_interval(result):
    metrics = result.metrics()
    assert metrics["finetune_task"] == "token" and metrics["finetune_eval_examples"] == 150
    assert set(metrics["finetune_eval_entities"]) == {"LOC", "ORG", "PER"}
    assert metrics["finetune_entity_f1"] == pytest.approx(result.runs.query("reported and model == 'pretrained'")
                                                          ["eval_entity_f1"].iloc[0])
    gain = metrics["finetune_entity_f1_gain"]
    assert gain == pytest.approx(metrics["finetune_entity_f1"] - metrics["finetune_baseline_entity_f1"])
    assert metrics["finetune_entity_f1_gain_ci_low"] < gain < metrics["finetune_entity_f1_gain_ci_high"]
    assert "entity-F1 points [95 % CI" in metrics["finetune_summary"]
    assert metrics["finetune_unknown_rate"] < 0.05 and metrics["finetune_truncated_words"] > 0


def test_a_seed_gives_the_same_run_twice(result, model, tokenizer, config, prepared):
    again = evaluate_token_finetuning(model, tokenizer, config.replace(save_model=False), device="cpu",
                                      prepared=prepared)
    assert np.array_equal(again.predictions[PRETRAINED], result.predictions[PRETRAINED])
    first = result.runs.query("model == 'pretrained'").drop(columns="seconds").reset_index(drop=True)
    assert again.runs.drop(columns="seconds").equals(first)


def test_a_kept_tagger_works_in_a_plain_transformers_pipeline(result, tokenizer, tmp_path):
    result.classifier.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path)
    assert loaded.config.id2label == dict(enumerate(result.prepared.task.labels))
    sentence = "新华社北京电，王英在上海访问。"
    tagger = pipeline("token-classification", model=str(tmp_path), tokenizer=AutoTokenizer.from_pretrained(tmp_path),
                      ignore_labels=[], device="cpu")
    tagged = tagger(sentence)
    labels = result.prepared.task.labels
    ours = predict_tags(loaded, align([list(sentence)], [[0] * len(sentence)], labels, tokenizer, 64), 0,
                        loaded.device, None, outside=0)
    assert [item["word"] for item in tagged] == list(sentence)
    assert [item["entity"] for item in tagged] == [labels[i] for i in ours]


def test_frozen_mode_is_the_probe_alone(model, tokenizer, config, prepared):
    frozen = evaluate_token_finetuning(model, tokenizer, config.replace(mode="frozen", save_model=False),
                                       device="cpu", prepared=prepared)
    assert frozen.runs["epoch"].tolist() == [1] and frozen.runs["reported"].all()
    assert 0 <= frozen.metrics()["finetune_entity_f1"] <= 1
