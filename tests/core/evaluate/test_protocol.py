"""The fixed evaluation protocol: masks, metrics, the baseline and fill-mask examples."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from bert_mlm.config import EvaluationConfig, ModelConfig
from bert_mlm.core.evaluate.fill_mask import fill_mask_examples, fill_mask_report, fill_mask_sentences_from
from bert_mlm.core.evaluate.protocol import (
    MASK_BLOCK,
    EvaluationSet,
    baseline_accuracy,
    change_sentence,
    evaluate,
    most_frequent_token,
    paired_change,
    prepare_evaluation_set,
    score_sequences,
)
from bert_mlm.core.evaluate.result import HeldOut
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.model.masking import IGNORE_INDEX, replacement_vocabulary
from bert_mlm.core.tokens.sequences import Collator, build_sequences
from bert_mlm.core.tokens.tokenizer import encode_documents, special_token_ids
from tests.core.conftest import synthetic_sentences

TINY = ModelConfig(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64
)
MAX_LENGTH = 64


@pytest.fixture(scope="module")
def data(tiny_tokenizer):
    docs = encode_documents(tiny_tokenizer, synthetic_sentences(3000, seed=11))
    sequences = build_sequences(docs, "packed", MAX_LENGTH, tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id)
    specials = special_token_ids(tiny_tokenizer)
    return {
        "docs": docs,
        "sequences": sequences,
        "specials": specials,
        "replacement": replacement_vocabulary(len(tiny_tokenizer), specials),
        "collator": Collator(tiny_tokenizer.pad_token_id, specials, MAX_LENGTH, padding="dynamic"),
    }


@pytest.fixture(scope="module")
def model(tiny_tokenizer):
    return build_model(TINY, tiny_tokenizer, seed=0).eval()


def one_draw(**protocol) -> EvaluationConfig:
    """The protocol with one mask draw per sequence and no masked-token stop, unless a test asks
    (the tests here count rows and masks per sequence)."""
    return EvaluationConfig(**{"mask_draws": 1, "min_masked_tokens": None, **protocol})


def in_sequence_order(evaluation_set: EvaluationSet) -> EvaluationSet:
    """The rows of a one-draw set sorted back into the held-out order (the protocol visits the
    sequences in a fixed random order)."""
    order = torch.argsort(evaluation_set.sequence_ids)
    return EvaluationSet(evaluation_set.input_ids[order], evaluation_set.attention_mask[order],
                         evaluation_set.labels[order], evaluation_set.sequence_ids[order])


def _prepare(tokenizer, data, config=None, collator=None, sequences=None, materialise=True):
    streamed = prepare_evaluation_set(
        data["sequences"] if sequences is None else sequences,
        collator or data["collator"],
        tokenizer.mask_token_id,
        data["replacement"],
        config or one_draw(),
    )
    return streamed.materialise() if materialise else streamed


def test_the_streamed_set_is_the_materialised_one_block_by_block(tiny_tokenizer, data, model):
    streamed = _prepare(tiny_tokenizer, data, materialise=False)
    whole = streamed.materialise()
    assert len(streamed) == len(data["sequences"]) > 2 * MASK_BLOCK  # several blocks
    rebuilt = [torch.cat(parts) for parts in zip(*streamed.blocks(), strict=True)]
    assert _same(whole, EvaluationSet(*rebuilt))
    assert streamed.masked_tokens == whole.masked_tokens
    assert evaluate(model, streamed, batch_size=50) == pytest.approx(evaluate(model, whole, batch_size=50))
    # Blocks are masked independently: stopping earlier keeps the blocks before the stop as they were.
    first_two = _prepare(tiny_tokenizer, data, config=one_draw(min_masked_tokens=1 + sum(
        int((labels != IGNORE_INDEX).sum()) for _, _, labels, _ in list(streamed.blocks())[:1])))
    assert len(first_two.labels) == 2 * MASK_BLOCK
    assert torch.equal(first_two.labels, whole.labels[: 2 * MASK_BLOCK])


def _same(a: EvaluationSet, b: EvaluationSet) -> bool:
    return (
        torch.equal(a.input_ids, b.input_ids)
        and torch.equal(a.attention_mask, b.attention_mask)
        and torch.equal(a.labels, b.labels)
    )


# ----------------------------------------------------------------------------- the fixed masks
def test_evaluation_masks_are_fixed(tiny_tokenizer, data):
    first = _prepare(tiny_tokenizer, data)
    torch.manual_seed(12345)  # the global RNG plays no part
    torch.rand(100)
    second = _prepare(tiny_tokenizer, data)
    assert _same(first, second)
    # Neither the collator's padding mode nor the evaluation batch size changes the masks.
    static = Collator(tiny_tokenizer.pad_token_id, data["specials"], MAX_LENGTH, padding="static")
    assert _same(first, _prepare(tiny_tokenizer, data, collator=static))
    assert _same(first, _prepare(tiny_tokenizer, data, config=one_draw(batch_size=7)))
    # A different protocol seed gives different masks.
    other = _prepare(tiny_tokenizer, data, config=one_draw(seed=1))
    assert not torch.equal(first.labels, other.labels)


@pytest.mark.parametrize("probability", [0.15, 0.3])
def test_evaluation_mask_rate(tiny_tokenizer, data, probability):
    evaluation_set = in_sequence_order(_prepare(tiny_tokenizer, data, config=one_draw(mask_probability=probability)))
    ids = evaluation_set.input_ids
    selected = evaluation_set.labels != IGNORE_INDEX
    real = evaluation_set.attention_mask == 1
    # Maskable: real tokens that are not special (the packed sequences hold [CLS] and [SEP]).
    original = torch.where(selected, evaluation_set.labels, ids)
    maskable = real & ~torch.isin(original, torch.tensor(data["specials"]))
    assert maskable.sum() > 30_000
    assert not (selected & ~maskable).any()
    assert abs(selected.sum().item() / maskable.sum().item() - probability) < 0.01
    assert evaluation_set.masked_tokens == int(selected.sum())
    # 80 % of the selected tokens show [MASK].
    assert abs((ids[selected] == tiny_tokenizer.mask_token_id).float().mean().item() - 0.8) < 0.03
    # Padded to the collator's max_length, attention exactly on the sequences.
    assert ids.shape == (len(data["sequences"]), MAX_LENGTH)
    assert evaluation_set.attention_mask.sum(dim=1).tolist() == [len(s) for s in data["sequences"]]


def test_max_sequences_limits_the_set(tiny_tokenizer, data):
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=10))
    assert evaluation_set.input_ids.shape[0] == 10


def test_no_sequences_raises(tiny_tokenizer, data):
    with pytest.raises(ValueError, match="evaluation"):
        _prepare(tiny_tokenizer, data, sequences=[])


def test_evaluation_set_batches_trim_padding(tiny_tokenizer, data):
    docs = data["docs"][:50]
    sequences = build_sequences(docs, "document", MAX_LENGTH, tiny_tokenizer.cls_token_id,
                                tiny_tokenizer.sep_token_id)
    evaluation_set = _prepare(tiny_tokenizer, data, sequences=sequences)
    seen = 0
    for inputs, attention, labels, _ in evaluation_set.batches(16):
        assert inputs.shape == attention.shape == labels.shape
        assert inputs.shape[1] == int(attention.sum(dim=1).max())
        seen += len(inputs)
    assert seen == len(sequences)


@pytest.mark.parametrize("kwargs", [{"mask_probability": 0.0}, {"mask_probability": 1.0}, {"batch_size": 0},
                                    {"mask_draws": 0}, {"mask_draws": 1.5}, {"min_masked_tokens": 0},
                                    {"min_masked_tokens": -5}, {"min_masked_tokens": 2.5}, {"min_masked_tokens": True},
                                    {"min_masked_tokens": "many"}])
def test_evaluation_config_rejects_bad_values(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=rf"^evaluation\.{name}: "):
        one_draw(**kwargs)


# ----------------------------------------------------------------------------- metrics
def test_evaluate_metrics(tiny_tokenizer, data, model):
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=120))
    model.train()
    metrics = evaluate(model, evaluation_set, batch_size=64)
    assert model.training  # the caller's mode is restored
    model.eval()
    assert set(metrics) == {"eval_loss", "eval_perplexity", "eval_accuracy", "eval_top5_accuracy", "eval_masked_tokens",
                            "eval_loss_se", "eval_accuracy_se", "eval_top5_accuracy_se", "eval_sequences",
                            "eval_mask_draws"}
    assert metrics["eval_masked_tokens"] == evaluation_set.masked_tokens > 0
    assert math.isfinite(metrics["eval_loss"]) and metrics["eval_loss"] > 0
    assert metrics["eval_perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]))
    assert 0.0 <= metrics["eval_accuracy"] <= metrics["eval_top5_accuracy"] <= 1.0

    # Token-weighted: the same numbers as one pass of the full model over the whole set, in
    # eval mode (no dropout), whatever the batch size.
    with torch.no_grad():
        out = model(
            input_ids=evaluation_set.input_ids,
            attention_mask=evaluation_set.attention_mask,
            labels=evaluation_set.labels,
        )
    assert metrics["eval_loss"] == pytest.approx(float(out.loss), abs=1e-4)
    selected = evaluation_set.labels != IGNORE_INDEX
    logits, targets = out.logits[selected], evaluation_set.labels[selected]
    assert metrics["eval_accuracy"] == pytest.approx(float((logits.argmax(-1) == targets).float().mean()))
    top5 = (logits.topk(5, dim=-1).indices == targets[:, None]).any(-1).float().mean()
    assert metrics["eval_top5_accuracy"] == pytest.approx(float(top5))
    small_batches = evaluate(model, evaluation_set, batch_size=7)
    assert small_batches["eval_loss"] == pytest.approx(metrics["eval_loss"], abs=1e-5)
    assert small_batches["eval_masked_tokens"] == metrics["eval_masked_tokens"]


def test_evaluate_without_masked_tokens_raises(model, tiny_tokenizer, data):
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=4))
    empty = EvaluationSet(
        evaluation_set.input_ids, evaluation_set.attention_mask, torch.full_like(evaluation_set.labels, IGNORE_INDEX),
        evaluation_set.sequence_ids,
    )
    with pytest.raises(ValueError, match="no token was masked"):
        evaluate(model, empty)


def test_baseline_accuracy_equals_manual_fraction(tiny_tokenizer, data):
    evaluation_set = _prepare(tiny_tokenizer, data)
    token = most_frequent_token(data["docs"], data["specials"])
    values, counts = np.unique(np.concatenate(data["docs"]), return_counts=True)
    assert token == int(values[np.argmax(counts)])
    assert token not in data["specials"]
    labels = evaluation_set.labels[evaluation_set.labels != IGNORE_INDEX].tolist()
    manual = sum(label == token for label in labels) / len(labels)
    assert manual > 0
    assert baseline_accuracy(evaluation_set, token) == pytest.approx(manual)
    assert baseline_accuracy(evaluation_set, tiny_tokenizer.pad_token_id) == 0.0


def test_most_frequent_token_skips_special_ids():
    docs = [np.array([0, 0, 0, 0, 7, 7, 9], dtype=np.int32), np.array([9, 9, 2], dtype=np.int32)]
    assert most_frequent_token(docs, [0, 1, 2, 3, 4]) == 9
    with pytest.raises(ValueError, match="evaluation"):
        most_frequent_token([np.array([0, 2, 3], dtype=np.int32)], [0, 1, 2, 3, 4])


# ----------------------------------------------------------------------------- fill-mask examples
def test_fill_mask_examples(tiny_tokenizer, model):
    sentences = ["The [MASK] of the function is returned.", "Return a new [MASK] of the list."]
    examples = fill_mask_examples(model, tiny_tokenizer, sentences, top_k=3)
    assert [e["sentence"] for e in examples] == sentences
    for example in examples:
        predictions = example["predictions"]
        assert len(predictions) == 3
        assert all(isinstance(p["token"], str) and 0.0 <= p["score"] <= 1.0 for p in predictions)
        scores = [p["score"] for p in predictions]
        assert scores == sorted(scores, reverse=True)
    assert fill_mask_examples(model, tiny_tokenizer, []) == []


def test_a_held_out_sentence_longer_than_the_models_positions_is_no_example_not_a_crash(tiny_tokenizer):
    """A 67-token Chinese review broke a 64-position model's evaluation node after training."""
    model = build_model(TINY.model_copy(update={"max_position_embeddings": 16}), tiny_tokenizer, seed=0).eval()
    long = "The value of the list is returned by the function when the object has a name and a value."
    short = "The value is returned."
    assert len(tiny_tokenizer(long)["input_ids"]) > 16 >= len(tiny_tokenizer(short)["input_ids"])
    assert fill_mask_report(model, tiny_tokenizer, None, [long], count=1, seed=0, top_k=3) == []
    (example,) = fill_mask_report(model, tiny_tokenizer, None, [long + " " + short], count=2, seed=0, top_k=3)
    assert example["sentence"].startswith("The") and len(example["predictions"]) == 3


def test_fill_mask_examples_requires_a_mask(tiny_tokenizer, model):
    with pytest.raises(ValueError, match=r"evaluation\.fill_mask_sentences"):
        fill_mask_examples(model, tiny_tokenizer, ["The [MASK] is here.", "No mask in this one."])


def test_fill_mask_sentences_fit_the_model_and_a_longer_one_of_the_users_is_named(tiny_tokenizer, model):
    """A held-out sentence longer than the model's positions (a continued model of 64 positions, a
    vocabulary that splits the text finely: 69 tokens) failed after training; it is no candidate
    now, and a user's sentence that long is one line."""
    positions = model.config.max_position_embeddings
    long = " ".join(["returned"] * (positions + 5)) + " value."
    short = "The value of the function is returned."
    sentences, _ = fill_mask_sentences_from([long, short], tiny_tokenizer, count=2, seed=0, max_chars=10_000,
                                            max_tokens=positions)
    assert sentences and all(len(tiny_tokenizer(s)["input_ids"]) <= positions for s in sentences)
    assert all("returned returned" not in s for s in sentences)
    with pytest.raises(ValueError, match=rf"evaluation\.fill_mask_sentences: .* tokens; the model reads at most "
                                         rf"{positions} \(model\.max_position_embeddings\)"):
        fill_mask_examples(model, tiny_tokenizer, [long.replace("value", "[MASK]")])


@pytest.mark.parametrize(("corpus", "column", "vocab"), [
    ("gutenberg/austen-persuasion.txt", None, "bert-base-uncased.vocab.txt"),
    ("chnsenticorp/ChnSentiCorp_htl_all.csv", "review", "bert-base-chinese.vocab.txt"),
])
def test_fill_mask_sentences_come_from_the_data_with_the_true_word(shared_dir, corpus, column, vocab):
    import pandas as pd

    from bert_mlm.core.common.text import cjk_characters, readable_spacing
    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    path = shared_dir / "corpora" / corpus
    texts = (pd.read_csv(path)[column].dropna().astype(str).tolist()[:500] if column
             else path.read_text(encoding="utf-8").split("\n\n")[200:700])
    tokenizer = load_tokenizer(shared_dir / "vocab" / vocab)
    sentences, answers = fill_mask_sentences_from(texts, tokenizer, count=4, seed=3)
    assert len(sentences) == len(answers) == 4
    assert (sentences, answers) == fill_mask_sentences_from(texts, tokenizer, count=4, seed=3)
    for sentence, answer in zip(sentences, answers, strict=True):
        assert sentence.count("[MASK]") == 1 and answer.isalpha()
        original = sentence.replace("[MASK]", answer)
        assert any(original in readable_spacing(" ".join(t.split())) for t in texts)
        assert readable_spacing(sentence) == sentence  # shown as a reader writes it
        assert len(tokenizer.tokenize(answer)) == 1  # one [MASK] can hold it
        if column:  # Chinese: a character of the review, in Chinese
            assert cjk_characters(answer) == 1 and cjk_characters(sentence) > 4
    model = build_model(ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64),
                        tokenizer, seed=0)
    # The four true words outscore every other token, so each ranks among the top 4 (a top-k of the whole
    # vocabulary, for an untrained model's random ranks, took seconds to decode).
    with torch.no_grad():
        model.cls.predictions.bias[[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(a))[0] for a in answers]] += 50
    examples = fill_mask_examples(model, tokenizer, sentences, top_k=5, answers=answers)
    for example, answer in zip(examples, answers, strict=True):
        assert example["answer"] == answer
        rank = example["answer_rank"]
        assert rank <= 4 and example["predictions"][rank - 1]["token"].lower() == answer.lower()


@pytest.mark.parametrize(("sentence", "vocab"), [
    ("the [MASK] sat on the [MASK] .", "bert-base-uncased.vocab.txt"),
    ("房间很[MASK]净，服务也[MASK]好。", "bert-base-chinese.vocab.txt"),
])
def test_every_mask_of_a_sentence_gets_its_own_fills(shared_dir, sentence, vocab):
    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(shared_dir / "vocab" / vocab)
    model = build_model(ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64),
                        tokenizer, seed=0)
    (example,) = fill_mask_examples(model, tokenizer, [sentence], top_k=3)
    first, second = example["per_mask"]
    assert example["predictions"] == first and len(first) == len(second) == 3
    assert first != second  # each [MASK] is predicted at its own position
    assert all(
        tokenizer.convert_tokens_to_ids(p["token"].replace(" ", "")) != tokenizer.unk_token_id for p in first + second
    )


# ----------------------------------------------------------------------------- standard errors, mask draws
def test_more_mask_draws_score_more_tokens_and_shrink_the_standard_error(tiny_tokenizer, data, model):
    results = {}
    for draws in (1, 4, 16):
        config = one_draw(max_sequences=60, mask_draws=draws)
        evaluation_set = _prepare(tiny_tokenizer, data, config=config, materialise=False)
        results[draws] = evaluate(model, evaluation_set, batch_size=64)
        assert results[draws]["eval_sequences"] == 60
    assert results[1]["eval_masked_tokens"] < results[4]["eval_masked_tokens"] < results[16]["eval_masked_tokens"]
    assert results[16]["eval_masked_tokens"] == pytest.approx(16 * results[1]["eval_masked_tokens"], rel=0.1)
    for name in ("eval_loss_se", "eval_accuracy_se", "eval_top5_accuracy_se"):  # (the untrained model hits ~1 %)
        assert results[1][name] > results[4][name] > results[16][name] > 0, name
    # Draw 0 is the single-draw protocol: adding draws keeps its masks.
    one = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=60))
    four = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=60, mask_draws=4))
    assert torch.equal(four.labels[:60], one.labels) and not torch.equal(four.labels[60:120], one.labels)
    assert four.sequence_ids.tolist() == list(range(60)) * 4


def test_the_standard_error_agrees_with_a_bootstrap_over_sequences(tiny_tokenizer, data, model):
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=200, mask_draws=2))
    metrics = evaluate(model, evaluation_set, batch_size=64)
    with torch.no_grad():
        logits = model(input_ids=evaluation_set.input_ids, attention_mask=evaluation_set.attention_mask).logits
    selected = evaluation_set.labels != IGNORE_INDEX
    losses = torch.nn.functional.cross_entropy(logits[selected], evaluation_set.labels[selected], reduction="none")
    rows = evaluation_set.sequence_ids[selected.nonzero()[:, 0]].numpy()
    per_loss = np.bincount(rows, weights=losses.numpy(), minlength=200)
    per_count = np.bincount(rows, minlength=200)
    rng = np.random.default_rng(0)
    draws = [
        (lambda pick: per_loss[pick].sum() / per_count[pick].sum())(rng.integers(0, 200, 200)) for _ in range(2000)
    ]
    assert metrics["eval_loss_se"] == pytest.approx(float(np.std(draws)), rel=0.15)


# ----------------------------------------------------------------------------- bounded cost: min_masked_tokens
def _masked_per_block(streamed) -> list[int]:
    return [int((labels != IGNORE_INDEX).sum()) for _, _, labels, _ in streamed.blocks()]


def test_the_evaluation_stops_at_the_first_block_that_reaches_min_masked_tokens(tiny_tokenizer, data, model):
    unbounded = _prepare(tiny_tokenizer, data, config=one_draw(mask_draws=3), materialise=False)
    per_block = _masked_per_block(unbounded)
    blocks_per_draw = math.ceil(len(data["sequences"]) / MASK_BLOCK)
    assert len(per_block) == 3 * blocks_per_draw
    # A bound inside the second draw: whole blocks up to the one that crosses it, nothing after.
    bound = sum(per_block[: blocks_per_draw + 1]) - 1
    bounded = _prepare(tiny_tokenizer, data, config=one_draw(mask_draws=3, min_masked_tokens=bound), materialise=False)
    assert _masked_per_block(bounded) == per_block[: blocks_per_draw + 1]
    metrics = evaluate(model, bounded, batch_size=100)
    assert bound <= metrics["eval_masked_tokens"] == bounded.masked_tokens < bound + max(per_block)
    assert metrics["eval_mask_draws"] == 2  # the second draw was begun, not finished
    assert metrics["eval_sequences"] == len(data["sequences"])
    assert math.isfinite(metrics["eval_loss_se"]) and metrics["eval_loss_se"] > 0
    # The stop depends on the masks alone: not on the batch size, the model or the global RNG.
    torch.manual_seed(7)
    other_model = build_model(TINY, tiny_tokenizer, seed=1)
    again = evaluate(other_model, bounded, batch_size=33)
    assert again["eval_masked_tokens"] == metrics["eval_masked_tokens"]
    assert again["eval_loss"] != metrics["eval_loss"]
    # A bound the draws cannot reach: every draw of every sequence, as without a bound.
    everything = _prepare(
        tiny_tokenizer, data, config=one_draw(mask_draws=3, min_masked_tokens=10**9), materialise=False
    )
    assert everything.masked_tokens == sum(per_block)
    assert evaluate(model, everything, batch_size=100)["eval_mask_draws"] == 3


def test_a_bounded_evaluation_is_a_random_sample_of_the_held_out_sequences(tiny_tokenizer, data):
    """Stopping early must not score only the first documents of the split: the sequences are
    visited in a fixed random order, the same for every run of the protocol."""
    config = one_draw(min_masked_tokens=1)  # one block
    first_block = _prepare(tiny_tokenizer, data, config=config)
    ids = first_block.sequence_ids
    count = len(data["sequences"])
    assert len(ids) == MASK_BLOCK < count and len(set(ids.tolist())) == MASK_BLOCK
    assert ids.max() > count * 0.9 and ids.min() < count * 0.1  # spread over the whole split
    assert not torch.equal(ids, torch.arange(MASK_BLOCK))
    assert _same(first_block, _prepare(tiny_tokenizer, data, config=config))  # fixed
    other_seed = _prepare(tiny_tokenizer, data, config=one_draw(min_masked_tokens=1, seed=3))
    assert not torch.equal(other_seed.sequence_ids, ids)


def test_evaluation_leaves_the_model_trainable(tiny_tokenizer, data):
    """Evaluation scores in eval mode (no dropout) under inference_mode; tuning evaluates
    mid-training, so the model must come back in the caller's mode, every module of it, and
    still train afterwards."""
    model = build_model(TINY, tiny_tokenizer, seed=0).train()
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=20))
    modes = []
    hook = model.bert.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    evaluate(model, evaluation_set, batch_size=8)
    hook.remove()
    assert modes and not any(modes)  # every forward pass in eval mode
    assert model.training and all(module.training for module in model.modules())  # the caller's mode back
    model.eval()
    evaluate(model, evaluation_set, batch_size=8)
    assert not any(module.training for module in model.modules())  # an evaluating caller's mode is kept too
    model.train()
    batch = torch.tensor([data["sequences"][0][:16].tolist()])
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad is not None


def test_bounded_evaluation_on_chinese_text(shared_dir):
    import pandas as pd

    from bert_mlm.core.common.text import cjk_characters
    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"]
    texts = reviews.dropna().astype(str).tolist()[:600]
    assert cjk_characters("".join(texts[:10])) > 500
    sequences = build_sequences(encode_documents(tokenizer, texts), "packed", MAX_LENGTH, tokenizer.cls_token_id,
                                tokenizer.sep_token_id)
    specials = special_token_ids(tokenizer)
    collator = Collator(tokenizer.pad_token_id, specials, MAX_LENGTH, padding="dynamic")
    config = EvaluationConfig(mask_draws=4, min_masked_tokens=3_000)
    evaluation_set = prepare_evaluation_set(sequences, collator, tokenizer.mask_token_id,
                                            replacement_vocabulary(len(tokenizer), specials), config)
    model = build_model(TINY, tokenizer, seed=0)
    metrics = evaluate(model, evaluation_set, batch_size=128)
    one_block = MASK_BLOCK * (MAX_LENGTH - 2) * config.mask_probability
    assert 3_000 <= metrics["eval_masked_tokens"] < 3_000 + 1.2 * one_block
    assert metrics["eval_mask_draws"] < 4 and metrics["eval_loss_se"] > 0
    assert metrics["eval_loss"] == pytest.approx(math.log(len(tokenizer)), rel=0.05)  # an untrained model: ~uniform


# ----------------------------------------------------------------------------- before and after, paired
def _continued(model: torch.nn.Module, scale: float = 0.005, seed: int = 5) -> torch.nn.Module:
    """A model near ``model`` (every weight moved a little), as continued pretraining leaves one:
    the two agree on most masked tokens, which is what pairing exploits."""
    import copy

    moved = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in moved.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return moved


def _check_paired(start, after, evaluation_set) -> HeldOut:
    """The paired change against separate evaluations of both models on the same set."""
    scores = score_sequences(after, evaluation_set, 64)  # scored once: a second scoring was half a second more
    change = paired_change(scores, score_sequences(start, evaluation_set, 64))
    alone, before = scores.summary(), evaluate(start, evaluation_set, 64)
    assert change.loss == alone.loss and change.masked_tokens == alone.masked_tokens  # the model's own scores
    for name in ("loss", "accuracy", "top5_accuracy"):
        assert getattr(change, f"{name}_start") == before[f"eval_{name}"]
        assert getattr(change, f"{name}_start_se") == before[f"eval_{name}_se"]
        assert getattr(change, f"{name}_change") == pytest.approx(getattr(alone, name) - before[f"eval_{name}"],
                                                                  abs=1e-12)
    # The same masked tokens for both: far tighter than two independent errors combined.
    independent = math.hypot(alone.loss_se, before["eval_loss_se"])
    assert 0 < change.loss_change_se < independent / 2
    # The file's keys: the held-out set's, with the start and the change beside them.
    assert {"eval_loss", "eval_loss_start", "eval_loss_change_se"} <= set(change.to_json())
    assert HeldOut.from_json(change.to_json()) == change
    return change


def test_the_start_is_scored_on_the_same_masks_and_the_change_is_paired(tiny_tokenizer, data, model):
    evaluation_set = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=200, mask_draws=2), materialise=False)
    after = _continued(model)
    change = _check_paired(model, after, evaluation_set)
    # The paired error is the spread of the per-sequence differences: a bootstrap over sequences agrees.
    start_scores, after_scores = score_sequences(model, evaluation_set), score_sequences(after, evaluation_set)
    difference, tokens = after_scores.loss - start_scores.loss, after_scores.tokens
    rng = np.random.default_rng(0)
    picks = (rng.integers(0, len(tokens), len(tokens)) for _ in range(2000))
    draws = [difference[pick].sum() / tokens[pick].sum() for pick in picks]
    assert change.loss_change_se == pytest.approx(float(np.std(draws)), rel=0.15)


def test_scores_of_other_masks_are_not_paired(tiny_tokenizer, data, model):
    one = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=60), materialise=False)
    other = _prepare(tiny_tokenizer, data, config=one_draw(max_sequences=60, seed=3), materialise=False)
    with pytest.raises(ValueError, match="not of the same masked tokens"):
        paired_change(score_sequences(model, one), score_sequences(model, other))


def test_before_and_after_on_chinese_text(shared_dir):
    import pandas as pd

    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(shared_dir / "vocab" / "bert-base-chinese.vocab.txt")
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")["review"]
    sequences = build_sequences(encode_documents(tokenizer, reviews.dropna().astype(str).tolist()[:300]), "packed",
                                MAX_LENGTH, tokenizer.cls_token_id, tokenizer.sep_token_id)
    specials = special_token_ids(tokenizer)
    collator = Collator(tokenizer.pad_token_id, specials, MAX_LENGTH, padding="dynamic")
    evaluation_set = prepare_evaluation_set(sequences, collator, tokenizer.mask_token_id,
                                            replacement_vocabulary(len(tokenizer), specials),
                                            EvaluationConfig(mask_draws=2, min_masked_tokens=2_000))
    start = build_model(TINY, tokenizer, seed=0)
    change = _check_paired(start, _continued(start), evaluation_set)
    sentence = change_sentence(change, "酒店评论.csv")
    assert sentence.startswith("continued pretraining ") and "held-out loss on 酒店评论.csv from " in sentence


@pytest.mark.parametrize(
    ("change", "error", "forgetting", "expected"),
    [
        (-0.79, 0.02, False, "continued pretraining lowered the held-out loss on reviews.csv from 3.91 to 3.12 "
                             "(-0.79 ± 0.02; accuracy 0.200 -> 0.300)"),
        (0.30, 0.01, True, "continued pretraining raised the held-out loss on news.txt from 3.91 to 4.21 "
                           "(+0.30 ± 0.01; accuracy 0.200 -> 0.300): what it forgot there; the loss and the accuracy "
                           "disagree: the accuracy rose too, so the model is less sure of its answers rather than "
                           "less often right"),
        (0.01, 0.02, True, "continued pretraining raised the held-out loss on news.txt from 3.91 to 3.92 "
                           "(+0.01 ± 0.02; accuracy 0.200 -> 0.300) (within noise)"),
        (-0.0123, 0.0012, False, "continued pretraining lowered the held-out loss on reviews.csv from 3.910 to "
                                 "3.898 (-0.012 ± 0.001; accuracy 0.200 -> 0.300)"),
    ],
)
def test_the_before_and_after_reads_as_one_sentence(change, error, forgetting, expected):
    corpus = "news.txt" if forgetting else "reviews.csv"
    scores = HeldOut(loss=3.91 + change, accuracy=0.3, loss_se=0.01, masked_tokens=1000)
    changed = replace(scores, loss_start=3.91, loss_change=change, loss_change_se=error, accuracy_start=0.2)
    assert change_sentence(changed, corpus, forgetting) == expected
    assert change_sentence(scores, corpus) is None  # no starting model scored
