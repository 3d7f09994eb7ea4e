"""Every bad parameter is refused before any work, with one message naming it and its value."""

from __future__ import annotations

import copy

import pytest
import torch
from kedro.config import OmegaConfigLoader

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
    ("masking.random_token_fraction", 0.3, r"masking\.mask_token_fraction \+ masking\.random_token_fraction = 1\.100 must not exceed 1"),
    ("tokenizer.vocab_size", 4, r"tokenizer\.vocab_size: 4 must be an integer larger than the 5 special tokens"),
    ("sequences.max_length", 1024, r"sequences\.max_length: 1024 exceeds model\.max_position_embeddings \(512\)"),
    ("sequences.max_length", 4, r"sequences\.max_length: 4 must be an integer >= 8"),
    ("model.hidden_size", 129, r"model\.hidden_size: 129 is not divisible by model\.num_attention_heads \(2\)"),
    ("training.precision", "fp8", r"training\.precision: 'fp8' is not one of"),
    ("training.batch_size", 0, r"training\.batch_size: 0 must be a positive integer"),
    ("training.max_steps", -5, r"training\.max_steps: -5 must be a positive integer"),
    ("corpus.split_ratios", {"train": 0.8, "valid": 0.1, "test": 0.2}, r"corpus\.split_ratios: .* must be non-negative and sum to 1 \(they sum to 1\.1000\)"),
    ("sequences.mode", "sliding", r"sequences\.mode: 'sliding' is not one of \('packed', 'document'\)"),
    ("sequences.padding", "left", r"sequences\.padding: 'left' is not one of"),
    ("tuning.n_trials", -1, r"tuning\.n_trials: -1 must be an integer >= 0"),
    ("evaluation.mask_probability", 1.0, r"evaluation\.mask_probability: 1\.0 must be in \(0, 1\)"),
    ("training.max_stepz", 10, r"training: unknown parameter\(s\) training\.max_stepz"),
    ("training.batch_size", True, r"training\.batch_size: True must be a number, not true/false"),
    ("tokenizer.vocab_size", False, r"tokenizer\.vocab_size: False must be a number, not true/false"),
    ("trainig.max_steps", 3, r"trainig: unknown parameter section; did you mean 'training'\?"),
    ("whatever.x", 1, r"whatever: unknown parameter section; the sections are \["),
    ("mask_030.overrides.masking.probability", 1.5, r"mask_030\.overrides: masking\.probability: 1\.5"),
    ("mask_045.overrides.training.batch_size", 0, r"mask_045\.overrides: training\.batch_size: 0 must be a positive integer"),
    ("mask_015.overrides.masking.probabilty", 0.2, r"mask_015\.overrides: masking: unknown parameter\(s\) masking\.probabilty"),
    ("mask_015.overrides.model", {"hidden_size": 64}, r"mask_015\.overrides\.model: only masking and training can be overridden"),
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
