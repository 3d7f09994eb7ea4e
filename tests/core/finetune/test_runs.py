"""Fine-tuning evaluation: it learns where there is a signal, pairs the baseline with the same
seeds, head and batches, is deterministic, and its intervals say what they should."""

from __future__ import annotations

import random
import re

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification

from bert_mlm.config import FinetuneConfig, ModelConfig
from bert_mlm.core.finetune.classifier import head_model
from bert_mlm.core.finetune.result import (
    BASELINE,
    PRETRAINED,
    Estimate,
    FinetuneResults,
    TaskResult,
    interval,
    paired_differences,
)
from bert_mlm.core.finetune.runs import evaluate_finetuning, prepare_task, starting_points
from bert_mlm.core.model.bert import build_model
from bert_mlm.errors import UserError
from tests.core.conftest import synthetic_sentences

# The untrained stand-in for a pretrained model: BERT's draw, whose mean-pooled states carry the marker words
# (local's first layer subtracts each token's neighbours, and a mean over an untrained model's positions cancels them).
TINY = ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=128, initialisation="bert")


def labelled_file(tmp_path, rows, name="task.csv", columns=("label", "review")) -> str:
    path = tmp_path / name
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module")
def model(tiny_tokenizer):
    return build_model(TINY, tiny_tokenizer, seed=3)


@pytest.fixture
def signal_file(tmp_path) -> str:
    """The label is whether the sentence holds "error error": learnable from the tokens alone."""
    sentences = synthetic_sentences(500, seed=5)
    marked = [s + (" error error" if i % 2 else " value value") for i, s in enumerate(sentences)]
    return labelled_file(tmp_path, [(["bad", "good"][i % 2], s) for i, s in enumerate(marked)], "signal.csv")


def config_for(path: str, **overrides) -> FinetuneConfig:
    values = dict(train_path=path, text_column="review", max_train_examples=300, max_eval_examples=150, epochs=3,
                  seeds=2, learning_rate=3e-3, batch_size=16, max_length=32, progress=False)
    return FinetuneConfig(**{**values, **overrides})


def test_fine_tuning_learns_a_signal_and_not_noise(tmp_path, tiny_tokenizer, model, signal_file):
    result = evaluate_finetuning(model, tiny_tokenizer, config_for(signal_file), device="cpu")
    metrics = result.task_result().to_json()
    assert metrics["finetune_accuracy"] > 0.9 and metrics["finetune_macro_f1"] > 0.9
    assert 0 <= metrics["finetune_accuracy_se"] < 0.05 and len(metrics["finetune_seed_accuracy"]) == 2
    assert metrics["finetune_seeds"] == [0, 1] and "finetune_gain" not in metrics  # no baseline given
    assert len(metrics["finetune_example_accuracy"]) == metrics["finetune_eval_examples"]
    runs = result.runs
    assert list(runs.columns[:6]) == ["task", "model", "seed", "epoch", "train_loss", "eval_score"]
    assert len(runs) == 2 * (1 + 3) and (runs["eval_score"] == runs["eval_accuracy"]).all()
    assert runs["epoch"].tolist() == [0, 1, 2, 3] * 2, "epoch 0: the linear-probe head before fine-tuning"
    tuned = runs[runs["epoch"] > 0]
    assert tuned.groupby("seed")["train_loss"].apply(lambda losses: losses.iloc[-1] < losses.iloc[0]).all()
    assert runs["reported"].tolist() == [False, False, False, True] * 2
    rng = random.Random(0)
    noise = labelled_file(tmp_path, [(rng.randint(0, 1), s) for s in synthetic_sentences(500, seed=5)], "noise.csv")
    nothing = evaluate_finetuning(model, tiny_tokenizer, config_for(noise), device="cpu").task_result().to_json()
    assert abs(nothing["finetune_accuracy"] - 0.5) < 0.12


def test_the_baseline_gets_the_same_seeds_head_and_batches(tiny_tokenizer, model, signal_file):
    baselines = starting_points(config_for(signal_file), model, tiny_tokenizer, TINY, init_seed=11)
    (baseline, name), = baselines.values()
    assert list(baselines) == [BASELINE] and name.startswith("the random initialisation")
    seen: dict[tuple[str, int], list[list[int]]] = {}

    def record(model_name, seed, epoch, indices):
        seen.setdefault((model_name, seed), []).append([epoch, *indices.tolist()])

    config = config_for(signal_file, epochs=2)
    result = evaluate_finetuning(model, tiny_tokenizer, config, baselines=baselines, device="cpu", on_batch=record)
    for seed in config.run_seeds:
        assert seen[(PRETRAINED, seed)] == seen[(BASELINE, seed)], "same batches, same order"
    assert seen[(PRETRAINED, 0)] != seen[(PRETRAINED, 1)], "each seed has its own order"
    runs = result.runs
    orders = runs.pivot_table(index=["seed", "epoch"], columns="model", values="data_order", aggfunc="first")
    assert (orders[PRETRAINED] == orders[BASELINE]).all()
    # The classification head (pooler and classifier) starts identical for both models.
    task = result.prepared.task
    heads = [head_model(AutoModelForSequenceClassification, encoder, task.labels, seed=0).state_dict()
             for encoder in (model, baseline)]
    for key in heads[0]:
        if key.startswith(("classifier.", "bert.pooler.")):
            assert torch.equal(heads[0][key], heads[1][key]), key
    assert not torch.equal(
        heads[0]["bert.embeddings.word_embeddings.weight"], heads[1]["bert.embeddings.word_embeddings.weight"]
    )
    metrics = result.task_result().to_json()
    assert metrics["finetune_gain"] == pytest.approx(
        metrics["finetune_accuracy"] - metrics["finetune_baseline_accuracy"]
    )
    assert metrics["finetune_gain_ci_low"] <= metrics["finetune_gain"] <= metrics["finetune_gain_ci_high"]
    summary = metrics["finetune_summary"]
    assert "accuracy points [95 % CI" in summary
    # Both accuracies and the majority class: whether a gain sits at 55 % or at 85 %.
    assert (f"fine-tuned accuracy {metrics['finetune_accuracy']:.3f} vs {metrics['finetune_baseline_accuracy']:.3f}"
            in summary and f"majority class {metrics['finetune_majority_accuracy']:.3f}" in summary)


@pytest.mark.parametrize("initialisation", ["bert", "local"])
def test_the_random_baseline_is_the_pretrainings_initial_weights(tiny_tokenizer, model, initialisation):
    pretraining = TINY.replace(initialisation=initialisation)
    trained = build_model(pretraining, tiny_tokenizer, seed=3)  # its config holds the resolved initializer_range
    (baseline, _), = starting_points(FinetuneConfig(), trained, tiny_tokenizer, pretraining, init_seed=42).values()
    initial = build_model(pretraining, tiny_tokenizer, seed=42)
    for (key, value), (_, expected) in zip(baseline.state_dict().items(), initial.state_dict().items(), strict=True):
        assert torch.equal(value, expected), key
    assert starting_points(FinetuneConfig(baseline="none"), model, tiny_tokenizer, TINY, 42) == {}
    # Without model.init_from, auto is the random initialisation: [auto, random] compares it once.
    both = FinetuneConfig(baseline=["auto", "random"])
    assert list(starting_points(both, model, tiny_tokenizer, TINY, 42)) == [BASELINE]


def test_a_continued_model_is_judged_against_its_start_and_against_no_pretraining(tmp_path, tiny_tokenizer, model,
                                                                                   signal_file):
    """finetune.baseline: [auto, random]: a paired gain over the starting checkpoint (the headline) and one over
    the same architecture randomly initialised, with the same seeds and batches."""
    start = build_model(TINY, tiny_tokenizer, seed=9)
    start.save_pretrained(tmp_path / "start")
    config = config_for(signal_file, epochs=1, baseline=["auto", "random"])
    continued = ModelConfig(init_from=str(tmp_path / "start"))
    baselines = starting_points(config, model, tiny_tokenizer, continued, init_seed=42)
    assert [(key, words.split()[1]) for key, (_, words) in baselines.items()] == [(BASELINE, "starting"),
                                                                                  ("random", "random")]
    assert torch.equal(baselines["random"][0].bert.embeddings.word_embeddings.weight,
                       build_model(TINY, tiny_tokenizer, seed=42).bert.embeddings.word_embeddings.weight)
    result = evaluate_finetuning(model, tiny_tokenizer, config, baselines=baselines, device="cpu")
    runs = result.runs
    assert set(runs["model"]) == {PRETRAINED, BASELINE, "random"}
    assert runs.groupby(["seed", "epoch"])["data_order"].nunique().eq(1).all()
    task = result.task_result()
    (random_start,) = task.others.values()
    assert task.baseline.startswith("the starting checkpoint") and random_start.baseline.startswith("the random")
    assert random_start.gain.mean == pytest.approx(task.score.mean - random_start.scores["accuracy"].mean)
    assert random_start.gain.low <= random_start.gain.mean <= random_start.gain.high
    assert f"over {random_start.baseline}" in task.summary
    again = TaskResult.from_json(task.to_json())
    assert again.others == task.others and again.summary == task.summary


def test_same_seed_same_result_and_early_stopping_reports_the_best_epoch(tiny_tokenizer, model, signal_file):
    config = config_for(signal_file, seeds=1, epochs=4, early_stopping_patience=1)
    first = evaluate_finetuning(model, tiny_tokenizer, config, device="cpu")
    second = evaluate_finetuning(model, tiny_tokenizer, config, device="cpu")
    columns = ["epoch", "train_loss", "eval_accuracy", "data_order"]  # the row of each epoch
    pd.testing.assert_frame_equal(first.runs[columns], second.runs[columns])
    runs = first.runs[first.runs["epoch"] > 0]
    reported = runs[runs["reported"]]
    assert len(reported) == 1 and reported["eval_accuracy"].iloc[0] == runs["eval_accuracy"].max()
    assert first.task_result().to_json()["finetune_accuracy"] == pytest.approx(runs["eval_accuracy"].max())


def test_frozen_mode_is_a_linear_probe(tiny_tokenizer, model, signal_file):
    result = evaluate_finetuning(model, tiny_tokenizer, config_for(signal_file, mode="frozen", seeds=1), device="cpu")
    assert result.task_result().to_json()["finetune_accuracy"] > 0.9  # mean-pooled vectors carry the marker words
    assert result.runs["epoch"].tolist() == [1]


def test_the_kept_classifier_loads_with_plain_transformers(tmp_path, tiny_tokenizer, model, signal_file):
    from transformers import AutoModelForSequenceClassification

    result = evaluate_finetuning(
        model, tiny_tokenizer, config_for(signal_file, seeds=1, save_model=True, pooling="cls"), device="cpu"
    )
    result.classifier.save_pretrained(tmp_path / "classifier")
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "classifier")
    assert loaded.config.id2label == {0: "bad", 1: "good"}
    text = "the value is an error error"
    batch = tiny_tokenizer(text, return_tensors="pt")
    assert loaded.config.id2label[int(loaded(**batch).logits.argmax())] == "good"


def test_chinese_reviews_fine_tune_above_the_majority_class(shared_dir):
    from bert_mlm.config import TokenizerConfig
    from bert_mlm.core.tokens.tokenizer import train_wordpiece

    reviews = shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv"
    texts = pd.read_csv(reviews)["review"].dropna().astype(str).tolist()[:3000]
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=3000, min_frequency=2, base_alphabet="none"))
    encoder = build_model(TINY, tokenizer, seed=0)
    config = FinetuneConfig(
        train_path=str(reviews),
        text_column="review",
        max_train_examples=600,
        max_eval_examples=300,
        epochs=5,
        seeds=1,
        learning_rate=2e-3,
        max_length=96,
        progress=False,
    )
    metrics = evaluate_finetuning(encoder, tokenizer, config, device="cpu").task_result().to_json()
    assert metrics["finetune_accuracy"] > metrics["finetune_majority_accuracy"] + 0.03


def test_the_interval_combines_seed_and_example_error():
    # Identical seeds: only the examples' sampling error remains (a binomial-like SE).
    examples = np.array([1.0] * 80 + [0.0] * 20)
    result = interval(np.full(3, 0.8), examples)
    assert result.se == pytest.approx(np.std(examples, ddof=1) / 10)
    assert result.low < 0.8 < result.high
    # A clear gain: the interval excludes zero; a pure coin flip does not.
    gain = interval(np.array([0.05, 0.06, 0.04]), np.array([0.05] * 500 + [0.0] * 0))
    assert gain.low > 0
    noise = interval(np.array([0.01, -0.02, 0.01]), np.random.default_rng(0).choice([-1.0, 0.0, 1.0], 400))
    assert noise.low < 0 < noise.high


def test_variants_are_paired_on_seeds_and_examples():
    per_seed = {"mask_015": [0.80, 0.82, 0.81], "mask_030": [0.85, 0.86, 0.86]}
    per_example = {"mask_015": [0.8] * 200, "mask_030": [0.85] * 200}
    results = {name: TaskResult("", {"accuracy": interval_estimate(per_seed[name], per_example[name])},
                                example_scores=per_example[name]) for name in per_seed}
    table = paired_differences(results, "mask_015")
    assert table["variant"].tolist() == ["mask_030"]
    assert table["finetune_difference"].iloc[0] == pytest.approx(0.0467, abs=1e-3)
    assert table["finetune_difference_ci_low"].iloc[0] > 0


def interval_estimate(per_seed: list[float], per_example: list[float]) -> Estimate:
    """A model's score as a task result keeps it: mean, standard error and each seed's."""
    found = interval(per_seed, per_example)
    return Estimate(found.mean, found.se, seeds=per_seed)


def test_a_result_is_typed_and_its_file_keeps_the_keys_of_earlier_versions():
    """The keys every version wrote (``finetune_accuracy``, ``finetune_gain_ci_low``...) are made and read in one
    place; a second task goes under ``finetune_tasks``, and a file without tasks is no result."""
    first = TaskResult("gained +1.0 points", {"accuracy": interval_estimate([0.8, 0.82], [1.0, 0.0, 1.0]),
                                              "macro_f1": interval_estimate([0.7, 0.72], [])},
                       {"accuracy": interval_estimate([0.78, 0.8], [1.0, 0.0, 0.0])},
                       Estimate(0.02, 0.01, -0.01, 0.05), [1.0, 0.0, 1.0], dataset="评论.csv", seeds=[0, 1])
    data = FinetuneResults((first,), "2026-01-01T00.00.00.000Z").to_json()
    assert {"finetune_accuracy", "finetune_accuracy_se", "finetune_seed_accuracy", "finetune_baseline_accuracy",
            "finetune_gain", "finetune_gain_ci_low", "finetune_gain_ci_high", "finetune_macro_f1",
            "finetune_example_accuracy", "finetune_summary", "finetune_model_version"} <= set(data)
    assert FinetuneResults.from_json(data).tasks == (first,)
    ner = TaskResult("entity F1", {"entity_f1": interval_estimate([0.6, 0.62], [0.5, 0.7])}, task="ner",
                     kind="token", metric="entity_f1",
                     detail={"gold_entities": {"LOC": 3, "PER": 2}, "scored_words": 40})
    both = FinetuneResults((first, ner), "2026-01-01T00.00.00.000Z")
    assert set(both.to_json()["finetune_tasks"]) == {"ner"} and FinetuneResults.from_json(both.to_json()) == both
    assert "finetune_example_accuracy" not in both.to_json(examples=False)
    assert not FinetuneResults.from_json({"eval_loss": 3.0}) and not FinetuneResults()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"train_path": "/nonexistent.csv"}, r"finetune\.train_path: '/nonexistent\.csv' is not a file"),
    ({"eval_fraction": 1.0}, r"finetune\.eval_fraction"),
    ({"seeds": 0}, r"finetune\.seeds: 0 must be a positive integer"),
    ({"epochs": True}, r"finetune\.epochs"),
    ({"mode": "linear"}, r"finetune\.mode: 'linear' is not one of"),
    ({"learning_rate": -1}, r"finetune\.learning_rate"),
    ({"early_stopping_patience": 0}, r"finetune\.early_stopping_patience"),
    ({"baseline": ["auto", "none"]}, r"finetune\.baseline: \['auto', 'none'\] must list different baselines"),
    ({"baseline": []}, r"finetune\.baseline"),
    ({"head_init": "zeros"}, r"finetune\.head_init: 'zeros' is not one of"),
])
def test_bad_finetune_parameters_are_named(kwargs, message):
    with pytest.raises(UserError, match=message):
        FinetuneConfig(**kwargs)


def test_a_bad_task_fails_before_any_training(tmp_path, tiny_tokenizer, model, signal_file):
    one_class = labelled_file(tmp_path, [(1, f"sentence {i}") for i in range(40)])
    with pytest.raises(UserError, match="one class only"):
        prepare_task(config_for(one_class), tiny_tokenizer, 128)
    with pytest.raises(UserError, match=r"^finetune\.tasks\.reviews: finetune\.label_column: .* one class only"):
        prepare_task(config_for(one_class), tiny_tokenizer, 128, name="reviews")
    # A kept sequence classifier must read what plain transformers reads: decided once the file says its kind.
    with pytest.raises(UserError, match=r"finetune\.save_model: .* set finetune\.pooling=cls"):
        prepare_task(config_for(signal_file, save_model=True), tiny_tokenizer, 128)


def test_a_model_at_the_majority_rate_is_said_to_be_no_better_than_always_answering_it(tmp_path, tiny_tokenizer,
                                                                                      model):
    """An English model on Chinese reviews headlined "+10.0 accuracy points gained" at the majority-class rate, with
    macro-F1 down by 0.18. The headline now gives accuracy and macro-F1 and says when the majority answer is as good."""
    rng = random.Random(1)
    rows = [("1" if rng.random() < 0.8 else "0", s) for s in synthetic_sentences(400, seed=9)]  # labels without signal
    path = labelled_file(tmp_path, rows, "skewed.csv")
    baselines = starting_points(config_for(path), model, tiny_tokenizer, TINY, init_seed=11)
    config = config_for(path, mode="frozen", seeds=2)
    metrics = evaluate_finetuning(model, tiny_tokenizer, config, baselines=baselines,
                                  device="cpu").task_result().to_json()
    summary = metrics["finetune_summary"]
    assert re.search(r"^fine-tuned accuracy 0\.\d{3} vs 0\.\d{3} for .* \(majority class 0\.\d{3}\): "
                     r"pretraining gained .* accuracy points \[95 % CI .*\] and [+-]\d\.\d{3} macro-F1 "
                     r"\(macro-F1 0\.\d{3} vs 0\.\d{3};",
                     summary), summary
    assert metrics["finetune_no_better_than_majority"]
    assert re.search(r"WARNING: the fine-tuned model is (no better than|not distinguishable from) always answering "
                     r"'1' \(0\.\d{4} of the eval examples", summary), summary
    signal = evaluate_finetuning(model, tiny_tokenizer, config_for(tmp_path_signal(tmp_path), mode="frozen", seeds=1),
                                 device="cpu").task_result().to_json()
    assert not signal["finetune_no_better_than_majority"] and "WARNING" not in signal["finetune_summary"]
    assert signal["finetune_summary"].startswith("fine-tuned accuracy 0.")
    assert "macro-F1 0." in signal["finetune_summary"]


def tmp_path_signal(tmp_path) -> str:
    sentences = synthetic_sentences(300, seed=5)
    marked = [s + (" error error" if i % 2 else " value value") for i, s in enumerate(sentences)]
    return labelled_file(tmp_path, [(["bad", "good"][i % 2], s) for i, s in enumerate(marked)], "signal.csv")


def test_labelled_text_unknown_to_the_vocabulary_is_warned_about(tmp_path, tiny_tokenizer, model, shared_dir, caplog):
    """An English vocabulary on Chinese reviews: most tokens are [UNK], so the result says little about pretraining."""
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    reviews = reviews.groupby("label").head(150)  # the file is sorted by label
    path = labelled_file(tmp_path, reviews[["label", "review"]].values.tolist(), "reviews.csv")
    with caplog.at_level("WARNING", logger="bert_mlm.core.finetune"):
        prepared = prepare_task(config_for(path), tiny_tokenizer, 128)
    assert prepared.unknown_rate > 0.5
    assert re.search(r"finetune: \d+\.\d % of the labelled text's tokens are \[UNK\] under the model's vocabulary "
                     r"\(more than 5 %\)", caplog.text)
    metrics = evaluate_finetuning(model, tiny_tokenizer, config_for(path, mode="frozen", seeds=1), device="cpu",
                                  prepared=prepared).task_result().to_json()
    assert metrics["finetune_unknown_rate"] == prepared.unknown_rate
    assert re.search(r"WARNING: \d+ % of the labelled text's tokens are unknown to the model's vocabulary",
                     metrics["finetune_summary"])
    english = prepare_task(config_for(tmp_path_signal(tmp_path)), tiny_tokenizer, 128)
    assert english.unknown_rate < 0.05
