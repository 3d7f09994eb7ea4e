"""Model construction, continued pretraining and the masked-positions-only loss."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertForMaskedLM

from bert_mlm.config import MaskingConfig, ModelConfig, TokenizerConfig
from bert_mlm.core.model.bert import MaskedPositionsMLM, build_model, masked_lm_loss
from bert_mlm.core.model.masking import IGNORE_INDEX, mask_tokens, replacement_vocabulary
from bert_mlm.core.tokens.sequences import Collator, build_sequences
from bert_mlm.core.tokens.tokenizer import encode_documents, special_token_ids, train_wordpiece
from tests.core.conftest import synthetic_sentences

TINY = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}


def tiny_config(**overrides) -> ModelConfig:
    return ModelConfig(**{**TINY, "max_position_embeddings": 64, **overrides})


def masked_batch(tokenizer, n=12, probability=0.15, seed=0):
    docs = encode_documents(tokenizer, synthetic_sentences(n, seed=seed))
    sequences = build_sequences(docs, "document", 32, tokenizer.cls_token_id, tokenizer.sep_token_id)
    specials = special_token_ids(tokenizer)
    batch = Collator(tokenizer.pad_token_id, specials, 32)(sequences)
    masked, labels = mask_tokens(
        batch["input_ids"],
        batch["special_tokens_mask"],
        tokenizer.mask_token_id,
        replacement_vocabulary(len(tokenizer), specials),
        MaskingConfig(probability=probability),
        torch.Generator().manual_seed(seed),
    )
    return masked, batch["attention_mask"], labels


# ----------------------------------------------------------------------------- construction
def test_build_model_takes_vocab_and_padding_from_tokenizer(tiny_tokenizer):
    model = build_model(tiny_config(), tiny_tokenizer, seed=0)
    assert isinstance(model, BertForMaskedLM)
    assert model.config.vocab_size == len(tiny_tokenizer)
    assert model.config.pad_token_id == tiny_tokenizer.pad_token_id == 0
    assert model.get_input_embeddings().weight.shape == (len(tiny_tokenizer), 32)
    assert model.get_output_embeddings().weight.shape[0] == len(tiny_tokenizer)
    assert model.config.hidden_size == 32
    assert model.config.num_hidden_layers == 1
    assert model.config.num_attention_heads == 2
    assert model.config.intermediate_size == 64
    assert model.config.max_position_embeddings == 64


def test_build_model_is_seeded_and_leaves_global_rng_alone(tiny_tokenizer):
    state = torch.get_rng_state()
    a = build_model(tiny_config(), tiny_tokenizer, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    b = build_model(tiny_config(), tiny_tokenizer, seed=1)
    c = build_model(tiny_config(), tiny_tokenizer, seed=2)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    weight = "bert.encoder.layer.0.intermediate.dense.weight"  # (local sets the first layer's attention)
    assert not torch.equal(a.state_dict()[weight], c.state_dict()[weight])


def test_the_initial_weights_spread_follows_model_initializer_range(tiny_tokenizer):
    """The matrices and embeddings are drawn with standard deviation ``model.initializer_range`` (a
    from-scratch lever, BENCHMARKS.md "Time to quality"); the model's config carries it."""
    spreads = {}
    for spread in (0.02, 0.05):
        model = build_model(tiny_config(initializer_range=spread), tiny_tokenizer, seed=0)
        assert model.config.initializer_range == spread
        spreads[spread] = [float(model.state_dict()[name].std()) for name in (
            "bert.encoder.layer.0.intermediate.dense.weight", "bert.embeddings.word_embeddings.weight")]
    for measured in spreads[0.05]:
        assert measured == pytest.approx(0.05, rel=0.1)
    for measured in spreads[0.02]:
        assert measured == pytest.approx(0.02, rel=0.1)


@pytest.mark.parametrize(
    ("overrides", "parameter"),
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, "model.hidden_size"),
        ({"hidden_size": 0}, "model.hidden_size"),
        ({"num_hidden_layers": 0}, "model.num_hidden_layers"),
        ({"hidden_dropout_prob": 1.0}, "model.hidden_dropout_prob"),
        ({"attn_implementation": "flash"}, "model.attn_implementation"),
        ({"initializer_range": 0}, "model.initializer_range"),
        ({"hidden_size": 30, "num_attention_heads": 2}, "model.initialisation"),  # local: an odd head width
    ],
)
def test_model_config_rejects_bad_values(overrides, parameter):
    with pytest.raises(ValueError, match=parameter.replace(".", r"\.")):
        tiny_config(**overrides)


# ----------------------------------------------------------------------------- the loss
def test_masked_positions_loss_equals_hf_loss(tiny_tokenizer):
    torch.manual_seed(0)
    model = build_model(tiny_config(), tiny_tokenizer, seed=3).eval()
    inputs, attention, labels = masked_batch(tiny_tokenizer)
    count_expected = int((labels != IGNORE_INDEX).sum())
    assert count_expected > 10
    with torch.no_grad():
        reference = model(input_ids=inputs, attention_mask=attention, labels=labels)
        loss_sum, correct, count = masked_lm_loss(MaskedPositionsMLM(model), inputs, attention, labels)
    assert count == count_expected
    assert torch.isfinite(reference.loss)
    torch.testing.assert_close(loss_sum / count, reference.loss, atol=1e-4, rtol=0)
    selected = labels != IGNORE_INDEX
    expected_correct = int((reference.logits.argmax(-1)[selected] == labels[selected]).sum())
    assert int(correct) == expected_correct
    # A random model is near-uniform: the loss is about log(vocab size).
    assert abs(float(reference.loss) - math.log(len(tiny_tokenizer))) < 1.0


def test_masked_positions_gradients_match_hf(tiny_tokenizer):
    model = build_model(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), tiny_tokenizer, seed=4)
    inputs, attention, labels = masked_batch(tiny_tokenizer, seed=1)
    model.zero_grad()
    model(input_ids=inputs, attention_mask=attention, labels=labels).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    loss_sum, _, count = masked_lm_loss(MaskedPositionsMLM(model), inputs, attention, labels)
    (loss_sum / count).backward()
    for name, grad in reference.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, atol=1e-5, rtol=1e-4)


def test_batch_without_masked_tokens_gives_zero_loss(tiny_tokenizer):
    model = build_model(tiny_config(), tiny_tokenizer, seed=5)
    inputs, attention, labels = masked_batch(tiny_tokenizer)
    labels = torch.full_like(labels, IGNORE_INDEX)
    mlm = MaskedPositionsMLM(model)
    assert list(mlm.parameters()) == list(model.parameters())
    loss_sum, correct, count = masked_lm_loss(mlm, inputs, attention, labels)
    assert count == 0
    assert int(correct) == 0
    assert torch.isfinite(loss_sum)
    assert loss_sum.item() == 0.0
    assert loss_sum.requires_grad  # still connected to the parameters
    (loss_sum / max(count, 1)).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads, "backward reached no parameter"
    assert all(torch.isfinite(g).all() and not g.any() for g in grads)


# ----------------------------------------------------------------------------- continued pretraining
def test_init_from_loads_saved_model(tiny_tokenizer, tmp_path):
    original = build_model(tiny_config(), tiny_tokenizer, seed=6)
    original.save_pretrained(tmp_path)
    loaded = build_model(tiny_config(init_from=str(tmp_path)), tiny_tokenizer, seed=99)
    for (name, a), b in zip(original.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_init_from_with_different_tokenizer_raises(tiny_tokenizer, tmp_path):
    build_model(tiny_config(), tiny_tokenizer, seed=7).save_pretrained(tmp_path)
    other = train_wordpiece(synthetic_sentences(300, seed=2), TokenizerConfig(vocab_size=150, base_alphabet="none"))
    assert len(other) != len(tiny_tokenizer)
    with pytest.raises(ValueError, match=r"model\.init_from") as info:
        build_model(tiny_config(init_from=str(tmp_path)), other, seed=0)
    assert str(len(tiny_tokenizer)) in str(info.value) and str(len(other)) in str(info.value)


def test_init_from_non_model_directory_raises(tiny_tokenizer, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"model\.init_from"):
        build_model(tiny_config(init_from=str(tmp_path)), tiny_tokenizer, seed=0)


# ----------------------------------------------------------------------------- FLOPs for MFU
def test_training_flops_per_token_matches_torch_flop_counter(tiny_tokenizer):
    # Eager attention: torch's FLOP counter does not count the CPU SDPA backward kernel.
    from torch.utils.flop_counter import FlopCounterMode

    from bert_mlm.core.model.bert import training_flops_per_token

    model = build_model(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                    attn_implementation="eager"), tiny_tokenizer, seed=0)
    inputs, attention, labels = masked_batch(tiny_tokenizer, n=12, probability=0.3)
    inputs, attention, labels = inputs[:, :32], torch.ones_like(attention[:, :32]), labels[:, :32]
    masked_fraction = float((labels != IGNORE_INDEX).float().mean())
    assert 0.1 < masked_fraction < 0.6
    with FlopCounterMode(display=False) as counter:
        loss_sum, _, count = masked_lm_loss(MaskedPositionsMLM(model), inputs, attention, labels)
        (loss_sum / count).backward()
    expected = training_flops_per_token(model.config, inputs.shape[1], masked_fraction) * inputs.numel()
    assert counter.get_total_flops() == pytest.approx(expected, rel=0.02)


# ----------------------------------------------------------------------------- checkpoints by path or Hub id
def test_a_checkpoint_is_a_directory_or_a_hub_id_with_one_offline_message(tmp_path, monkeypatch):
    from bert_mlm.core.model.bert import resolve_checkpoint

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "model" / "model.safetensors").write_bytes(b"")
    assert resolve_checkpoint(tmp_path / "model") == str(tmp_path / "model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"model\.init_from: '.*empty' is not a model directory"):
        resolve_checkpoint(tmp_path / "empty")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-cache"))  # an empty cache
    with pytest.raises(ValueError, match=r"model\.init_from: 'bert-base-chinese' is neither a local model directory "
                                         r"nor in the Hugging Face cache.*huggingface-cli download bert-base-chinese"):
        resolve_checkpoint("bert-base-chinese")
