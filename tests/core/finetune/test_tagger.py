"""Token-classification fine-tuning on real MSRA sentences with a tiny model, through the one runner
every task kind shares: the loss falls and the entity F1 leaves 0, the baseline gets the same seeds,
head and batches, the result pairs them with an interval, a seed gives the same run twice, and a
tagger kept by the catalog's dataset works in a plain ``transformers`` pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from kedro.io.core import Version
from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

from bert_mlm.config import FinetuneConfig, ModelConfig
from bert_mlm.core.finetune.alignment import align
from bert_mlm.core.finetune.result import BASELINE, PRETRAINED, FinetuneResults
from bert_mlm.core.finetune.runs import evaluate_finetuning, prepare_task, starting_points
from bert_mlm.core.finetune.tagger import PreparedTagging, predict_tags
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.tokens.tokenizer import load_tokenizer
from bert_mlm.datasets.pretrained import Classifier, ClassifierDataset

TINY = ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=128)


@pytest.fixture(scope="module")
def tokenizer(shared_dir):
    return load_tokenizer(shared_dir / "vocab/bert-base-chinese.vocab.txt")


@pytest.fixture(scope="module")
def model(tokenizer):
    return build_model(TINY, tokenizer, seed=3)


@pytest.fixture(scope="module")
def config(msra_head) -> FinetuneConfig:
    # task auto: the .conll name says token; a tagger is kept whatever finetune.pooling says.
    return FinetuneConfig(train_path=str(msra_head), max_train_examples=400,
                          max_eval_examples=150, epochs=3, seeds=1, learning_rate=5e-3, max_length=64, progress=False,
                          save_model=True)


@pytest.fixture(scope="module")
def prepared(config, tokenizer):
    return prepare_task(config, tokenizer, TINY.max_position_embeddings)


@pytest.fixture(scope="module")
def result(model, tokenizer, config, prepared):
    baselines = starting_points(config, model, tokenizer, TINY, init_seed=11)
    return evaluate_finetuning(model, tokenizer, config, baselines=baselines, device="cpu", prepared=prepared)


def test_the_tagger_learns_and_its_baseline_is_paired(result, prepared):
    assert isinstance(prepared, PreparedTagging)
    runs = result.runs
    assert {"eval_f1_LOC", "eval_f1_ORG", "eval_f1_PER"} <= set(runs.columns)
    assert (runs["eval_score"] == runs["eval_entity_f1"]).all()
    assert runs["epoch"].tolist() == [0, 1, 2, 3] * 2, "epoch 0: the linear-probe head before fine-tuning"
    for _, rows in runs[runs["epoch"] > 0].groupby("model"):
        assert rows["train_loss"].iloc[-1] < rows["train_loss"].iloc[0]
        assert rows["eval_entity_f1"].iloc[-1] > 0
    pretrained, baseline = (runs[(runs["model"] == name) & (runs["epoch"] > 0)] for name in (PRETRAINED, BASELINE))
    assert pretrained["data_order"].tolist() == baseline["data_order"].tolist()  # the same batches in the same order
    assert runs["reported"].tolist() == [False, False, False, True] * 2


def test_the_result_pairs_the_models_by_entity_f1_with_an_interval(result):
    task = result.task_result()
    assert (task.kind, task.metric, task.eval_examples) == ("token", "entity_f1", 150)
    assert set(task.detail["gold_entities"]) == {"LOC", "ORG", "PER"}
    assert set(task.detail["entity_f1_per_type"]) == {PRETRAINED, BASELINE}
    reported = result.runs.query("reported")
    assert task.score.mean == pytest.approx(reported.query("model == 'pretrained'")["eval_entity_f1"].iloc[0])
    assert task.detail["entity_f1_per_type"][PRETRAINED]["PER"] == pytest.approx(
        reported.query("model == 'pretrained'")["eval_f1_PER"].iloc[0])
    assert task.gain.mean == pytest.approx(task.score.mean - task.baseline_score.mean)
    assert task.gain.low < task.gain.mean < task.gain.high
    assert "entity F1 points [95 % CI" in task.summary and "strict IOB2" in task.summary
    assert set(task.scores) == {"entity_f1", "entity_precision", "entity_recall", "token_accuracy"}
    # Each sentence's linearised share of the F1: its mean is the F1, so variants pair as examples do.
    assert np.mean(task.example_scores) == pytest.approx(task.score.mean)
    assert task.unknown_rate < 0.05 and task.detail["truncated_words"] > 0
    data = FinetuneResults((task,), "2026-01-01T00.00.00.000Z").to_json()
    assert data["finetune_kind"] == "token" and data["finetune_entity_f1"] == task.score.mean
    assert data["finetune_gain_ci_low"] == task.gain.low and "finetune_entity_f1_per_type" in data
    assert FinetuneResults.from_json(data).to_json() == data  # read back as written


def test_a_seed_gives_the_same_run_twice(result, model, tokenizer, config, prepared):
    again = evaluate_finetuning(model, tokenizer, config.replace(save_model=False), device="cpu", prepared=prepared)
    assert np.array_equal(again.scores[PRETRAINED].predictions, result.scores[PRETRAINED].predictions)
    first = result.runs.query("model == 'pretrained'").drop(columns="seconds").reset_index(drop=True)
    assert again.runs.drop(columns="seconds").equals(first)


def test_a_kept_tagger_loads_through_the_dataset_and_tags_in_plain_transformers(result, tokenizer, tmp_path):
    version = "2026-01-01T00.00.00.000Z"
    dataset = ClassifierDataset(str(tmp_path / "finetuned_classifier"), version=Version(None, version))
    dataset.save(Classifier({"": result.classifier}, tokenizer))
    loaded = dataset.load().model
    assert type(loaded).__name__ == "BertForTokenClassification"  # the config's architecture chose the class
    directory = tmp_path / "finetuned_classifier" / version / "finetuned_classifier"
    assert AutoModelForTokenClassification.from_pretrained(directory).config.id2label == dict(
        enumerate(result.prepared.task.labels))
    sentence = "新华社北京电，王英在上海访问。"
    tagger = pipeline("token-classification", model=str(directory), tokenizer=AutoTokenizer.from_pretrained(directory),
                      ignore_labels=[], device="cpu")
    tagged = tagger(sentence)
    labels = result.prepared.task.labels
    ours = predict_tags(loaded, align([list(sentence)], [[0] * len(sentence)], labels, tokenizer, 64), 0,
                        loaded.device, None, outside=0)
    assert [item["word"] for item in tagged] == list(sentence)
    assert [item["entity"] for item in tagged] == [labels[i] for i in ours]


def test_frozen_mode_is_the_probe_alone(model, tokenizer, config, prepared):
    frozen = evaluate_finetuning(model, tokenizer, config.replace(mode="frozen", save_model=False), device="cpu",
                                 prepared=prepared)
    assert frozen.runs["epoch"].tolist() == [1] and frozen.runs["reported"].all()
    assert 0 <= frozen.task_result().score.mean <= 1
