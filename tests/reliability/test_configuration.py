"""Every bad parameter is refused before any work, with one message naming it and its value."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from kedro.config import OmegaConfigLoader

from bert_mlm.core.errors import UserError
from bert_mlm.hooks import validate_parameters


@pytest.fixture(scope="module")
def base_parameters(project_root) -> dict:
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env="local",
                               merge_strategy={"parameters": "soft"})
    return dict(loader["parameters"])


def with_override(parameters: dict, dotted: str, value) -> dict:
    result = copy.deepcopy(parameters)
    *path, key = dotted.split(".")
    section = result
    for part in path:
        section = section.setdefault(part, {})
    section[key] = value
    return result


def test_the_shipped_configuration_is_valid(base_parameters):
    validate_parameters(base_parameters)


CASES = [
    ("masking.probability", 0.0, r"masking\.probability: 0\.0 must be in the open interval \(0, 1\)"),
    ("masking.probability", 1.2, r"masking\.probability: 1\.2"),
    ("masking.mask_token_fraction", -0.1, r"masking\.mask_token_fraction: -0\.1 must be in \[0, 1\]"),
    (
        "masking.random_token_fraction",
        0.3,
        r"masking\.mask_token_fraction \+ masking\.random_token_fraction = 1\.100 must not exceed 1",
    ),
    ("tokenizer.vocab_size", 4, r"tokenizer\.vocab_size: 4 must be an integer larger than the 5 special tokens"),
    ("sequences.max_length", 1024, r"sequences\.max_length: 1024 exceeds model\.max_position_embeddings \(512\)"),
    ("sequences.max_length", 4, r"sequences\.max_length: 4 must be an integer >= 8"),
    ("model.hidden_size", 129, r"model\.hidden_size: 129 is not divisible by model\.num_attention_heads \(2\)"),
    ("training.precision", "fp8", r"training\.precision: 'fp8' is not one of"),
    ("training.batch_size", 0, r"training\.batch_size: 0 must be a positive integer"),
    ("training.max_steps", -5, r"training\.max_steps: -5 must be a positive integer"),
    (
        "corpus.split_ratios",
        {"train": 0.8, "valid": 0.1, "test": 0.2},
        r"corpus\.split_ratios: .* must be non-negative and sum to 1 \(they sum to 1\.1000\)",
    ),
    ("sequences.mode", "sliding", r"sequences\.mode: 'sliding' is not one of \('packed', 'document'\)"),
    ("sequences.padding", "left", r"sequences\.padding: 'left' is not one of"),
    ("tuning.n_trials", -1, r"tuning\.n_trials: -1 must be an integer >= 0"),
    ("evaluation.mask_probability", 1.0, r"evaluation\.mask_probability: 1\.0 must be in the open interval \(0, 1\)"),
    ("training.max_stepz", 10, r"training: unknown parameter\(s\) training\.max_stepz"),
    ("training.batch_size", True, r"training\.batch_size: True must be a number, not true/false"),
    ("tokenizer.vocab_size", False, r"tokenizer\.vocab_size: False must be a number, not true/false"),
    ("trainig.max_steps", 3, r"trainig: unknown parameter section; did you mean 'training'\?"),
    ("whatever.x", 1, r"whatever: unknown parameter section; the sections are \["),
    ("mask_030.overrides.masking.probability", 1.5, r"mask_030\.overrides: masking\.probability: 1\.5"),
    (
        "mask_045.overrides.training.batch_size",
        0,
        r"mask_045\.overrides: training\.batch_size: 0 must be a positive integer",
    ),
    (
        "mask_015.overrides.masking.probabilty",
        0.2,
        r"mask_015\.overrides: masking: unknown parameter\(s\) masking\.probabilty",
    ),
    (
        "mask_015.overrides.model",
        {"hidden_size": 64},
        r"mask_015\.overrides\.model: only masking and training can be overridden",
    ),
    ("mask_015.overrides.masking", 0.2, r"mask_015\.overrides\.masking: 0\.2 must be a mapping of masking values"),
    ("mask_015.overrides", "fast", r"mask_015\.overrides: 'fast' must be a mapping"),
]


@pytest.mark.parametrize(("dotted", "value", "message"), CASES, ids=[c[0] + "=" + str(c[1]) for c in CASES])
def test_bad_value_is_named(base_parameters, dotted, value, message):
    with pytest.raises(ValueError, match=message):
        validate_parameters(with_override(base_parameters, dotted, value))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_where_unavailable(base_parameters):
    with pytest.raises(ValueError, match=r"training\.device: 'cuda' was requested but CUDA is not available"):
        validate_parameters(with_override(base_parameters, "training.device", "cuda"))


def test_auto_precision_falls_back_to_fp32_on_cpu_with_a_log(base_parameters, caplog):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with caplog.at_level("INFO"):
        validate_parameters(with_override(base_parameters, "training.precision", "auto"))
    assert "using fp32" in caplog.text


@pytest.mark.parametrize("env", ["smoke", "gpu", "zh"])
def test_every_shipped_environment_is_valid(project_root, env, monkeypatch):
    if env == "gpu":  # resolving the device would refuse cuda here; the rest must hold
        monkeypatch.setattr("bert_mlm.hooks.resolve_device", lambda requested: torch.device("cpu"))
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env=env,
                               merge_strategy={"parameters": "soft"})
    validate_parameters(dict(loader["parameters"]))


# ----------------------------------------------------------------------------- model.init_from
@pytest.fixture(scope="module")
def starting_model(tmp_path_factory):
    """A saved model directory with its tokenizer, as continued pretraining starts from."""
    from bert_mlm.config import ModelConfig, TokenizerConfig
    from bert_mlm.core.model import build_model
    from bert_mlm.core.tokenizer import train_wordpiece

    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "omega",
        "theta",
        "kappa",
        "sigma",
        "rho",
        "tau",
        "东",
        "西",
        "南",
        "北",
    ]
    texts = [" ".join(words[(i * 7 + k) % len(words)] for k in range(9)) for i in range(100)]
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=120, min_frequency=1, base_alphabet="none"))
    directory = tmp_path_factory.mktemp("start")
    build_model(ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64),
                tokenizer, seed=0).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]


def vocab_file(path, tokens) -> str:
    path.write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")
    return str(path)


def test_init_from_with_another_vocabulary_is_refused_up_front(base_parameters, starting_model, tmp_path):
    directory, tokens = starting_model
    special, rest = tokens[:5], tokens[5:]

    def validate(vocab_path):
        parameters = with_override(base_parameters, "model.init_from", str(directory))
        validate_parameters(with_override(parameters, "tokenizer.vocab_path", vocab_path))

    validate(vocab_file(tmp_path / "same.txt", tokens))  # the model's own vocabulary: fine
    with pytest.raises(UserError, match=rf"tokenizer\.vocab_path: '.*shuffled\.txt' is not the vocabulary of "
                                        rf"model\.init_from '{directory}' \({len(tokens)} vs {len(tokens)} tokens; "
                                        r"\d+ ids mean the same token in both\); the starting model's own tokenizer"):
        validate(vocab_file(tmp_path / "shuffled.txt", special + rest[::-1]))  # same size, other ids
    with pytest.raises(UserError, match=rf"is not the vocabulary .*\({len(tokens) - 10} vs {len(tokens)} tokens"):
        validate(vocab_file(tmp_path / "smaller.txt", tokens[:-10]))
    # A model saved without its tokenizer: the sizes are compared.
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((directory / name).read_bytes())
    parameters = with_override(base_parameters, "model.init_from", str(bare))
    validate_parameters(with_override(parameters, "tokenizer.vocab_path", vocab_file(tmp_path / "v.txt", tokens)))
    with pytest.raises(UserError, match=rf"'.*smaller\.txt' has {len(tokens) - 10} tokens but model\.init_from "
                                        rf"'{bare}' has a vocabulary of {len(tokens)}"):
        validate_parameters(with_override(parameters, "tokenizer.vocab_path", str(tmp_path / "smaller.txt")))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root.mkdir() or root, r"is not a model directory \(no config\.json there\)"),
        (lambda root: (root.write_text("a text file"), root)[1], r"is a file, not a model directory"),
        (lambda root: root / "missing" / "model", r"does not exist \(the nearest existing folder is '.*'\)"),
        (lambda root: (root.mkdir(), (root / "config.json").write_text("{}"))[0] or root,
         r"is not a model directory: it has a config\.json but no weights "
         r"\(model\.safetensors or pytorch_model\.bin\)"),
    ],
    ids=["empty directory", "text file", "missing path", "config without weights"],
)
def test_init_from_a_path_says_what_is_missing_there(base_parameters, tmp_path, make, message):
    path = make(tmp_path / "start")
    with pytest.raises(UserError, match=rf"^model\.init_from: '{path}' {message}") as info:
        validate_parameters(with_override(base_parameters, "model.init_from", str(path)))
    assert "\n" not in str(info.value) and "huggingface-cli" not in str(info.value)


def test_init_from_relative_paths_are_paths_not_hub_ids(monkeypatch, tmp_path):
    from bert_mlm.core.model import resolve_checkpoint

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for text in ("./model", "../nope/model", "data/06_models/model", "~/surely-not-here-27a"):
        with pytest.raises(UserError, match=rf"model\.init_from: '{re.escape(text)}' does not exist"):
            resolve_checkpoint(text)


def test_a_step_that_cannot_fit_in_memory_is_refused_with_the_estimate(base_parameters):
    """sequences.max_length=100000 with model.max_position_embeddings=100000 was killed by the OOM
    killer at 24 GB (rc 137, no message): the estimate refuses it up front, naming both numbers."""
    parameters = with_override(base_parameters, "sequences.max_length", 100000)
    parameters = with_override(parameters, "model.max_position_embeddings", 100000)
    with pytest.raises(
        UserError,
        match=r"^sequences\.max_length: one training step of training\.batch_size=32 "
        r"sequences of 100000 tokens needs about [\d,.]+ GB .* but only [\d,.]+ GB is "
        r"left \(available RAM\); lower sequences\.max_length or training\.batch_size$",
    ):
        validate_parameters(parameters)


def test_the_step_estimate_follows_a_measured_step():
    """A real step on this CPU (eager attention, dropout) took 0.77 GB at 8 x 1024 tokens and
    0.24 GB at 32 x 128 (peak RSS); the estimate stays within 25 % of both, and is quadratic."""
    from bert_mlm.core.model import training_step_bytes

    def estimate(batch, length):
        return training_step_bytes(128, 2, 2, 512, 8192, length, batch, length)

    assert estimate(8, 1024) == pytest.approx(0.77e9, rel=0.25)
    assert estimate(32, 128) == pytest.approx(0.24e9, rel=0.25)
    assert estimate(1, 100000) > 50 * estimate(1, 10000) > 0
