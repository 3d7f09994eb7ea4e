"""The `bert-mlm fill-mask` command: latest version, a named version, a directory, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner
from kedro.io.core import Version
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset
from bert_mlm.fill_mask import fill_mask, fill_mask_command


def fill_mask_cli(*args: str) -> subprocess.CompletedProcess:
    """``bert-mlm fill-mask ARGS`` through its click command (the one the entry point dispatches
    to), in this process: a subprocess spends ~5 s importing torch and transformers again.
    ``test_command_line`` runs the real entry point."""
    result = CliRunner().invoke(fill_mask_command, list(args), prog_name="bert-mlm fill-mask")
    return subprocess.CompletedProcess(["bert-mlm", "fill-mask", *args], result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def project_with_models(tmp_path, monkeypatch):
    texts = ["the cat sat on the mat", "the dog sat on the rug", "a cat ran"] * 30
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=40, min_frequency=1, base_alphabet="none"))
    for version, seed, where in (
        ("2026-01-01T00.00.00.000Z", 0, "masked_lm"),
        ("2026-01-02T00.00.00.000Z", 1, "masked_lm"),
        ("2026-01-03T00.00.00.000Z", 2, "mask_030/masked_lm"),
    ):
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=32, pad_token_id=0)
        import torch

        torch.manual_seed(seed)
        MaskedLMDataset(str(tmp_path / "data/06_models" / where), version=Version(None, version)).save(
            MaskedLM(BertForMaskedLM(config), tokenizer)
        )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_latest_and_named_versions_differ(project_with_models):
    latest = fill_mask(["the [MASK] sat"], top_k=3)
    named_latest = fill_mask(["the [MASK] sat"], version="2026-01-02T00.00.00.000Z", top_k=3)
    older = fill_mask(["the [MASK] sat"], version="2026-01-01T00.00.00.000Z", top_k=3)
    assert latest == named_latest
    assert latest != older
    assert len(latest[0]["predictions"]) == 3
    variant = fill_mask(["the [MASK] sat"], top_k=3, variant="mask_030")  # data/06_models/mask_030/masked_lm
    assert variant != latest and variant != older


@pytest.mark.slow
def test_command_line(project_with_models):
    result = subprocess.run(
        [sys.executable, "-m", "bert_mlm", "fill-mask", "the [MASK] sat on the mat", "--top-k", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "the [MASK] sat on the mat"
    assert lines[1].strip().startswith("1.") and lines[2].strip().startswith("2.")


def test_clear_errors(project_with_models, tmp_path):
    no_mask = fill_mask_cli("no mask here")
    assert no_mask.returncode == 2 and "fill-mask SENTENCES: 'no mask here' has no [MASK]" in no_mask.stderr
    assert "evaluation." not in no_mask.stderr  # the command's own argument, not a configuration key
    missing = fill_mask_cli("a [MASK]", "--model", str(tmp_path / "nope"))
    assert missing.returncode == 2 and f"--model: '{tmp_path / 'nope'}' does not exist" in missing.stderr


def test_variant_or_version_with_a_model_directory_is_refused(project_with_models):
    model = str(latest_model(project_with_models))
    for option, value in (("--variant", "mask_030"), ("--version", "2026-01-01T00.00.00.000Z")):
        result = fill_mask_cli("the [MASK] sat", "--model", model, option, value)
        assert result.returncode == 2
        assert (f"--model: a model directory is one model; {option} chooses among the project's trained models: "
                "give one or the other") in result.stderr


def test_outside_the_project_the_folder_looked_in_is_absolute(project_with_models, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = fill_mask_cli("the [MASK] sat")
    assert result.returncode == 2
    message = " ".join(result.stderr.split())  # click wraps nothing, but be independent of it
    assert (f"no trained model under '{elsewhere}/data/06_models/masked_lm', relative to the current folder "
            f"'{elsewhere}': run this in the project's folder") in message


@pytest.mark.parametrize("damage", ["truncated safetensors", "pickled bin", "truncated bin", "config not json"])
def test_a_broken_model_directory_is_one_line(project_with_models, tmp_path, damage):
    import shutil

    import torch

    broken = tmp_path / "broken"
    shutil.copytree(latest_model(project_with_models), broken)
    weights = broken / "model.safetensors"
    if damage == "truncated safetensors":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "config not json":
        (broken / "config.json").write_text("{ not json")
    else:
        state = BertForMaskedLM.from_pretrained(str(broken)).state_dict()
        weights.unlink()
        if damage == "pickled bin":
            state = {**state, "extra": Ellipsis.__class__}  # a class: the weights-only loader refuses it
        torch.save(state, broken / "pytorch_model.bin")
        if damage == "truncated bin":
            data = (broken / "pytorch_model.bin").read_bytes()
            (broken / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    result = fill_mask_cli("the [MASK] sat", "--model", str(broken))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    expected = {"truncated safetensors": f"the weights '{weights}' are unreadable",
                "pickled bin": f"'{broken / 'pytorch_model.bin'}' is a pickle that names code or objects other than "
                               "tensors, which the weights-only loader refuses",
                "truncated bin": f"the weights '{broken / 'pytorch_model.bin'}' are unreadable",
                "config not json": f"'{broken / 'config.json'}' is not a readable model config"}[damage]
    assert last.startswith(f"Error: --model: {expected}"), last


def latest_model(project):
    folder = project / "data" / "06_models" / "masked_lm"
    return sorted(folder.iterdir())[-1] / "masked_lm"


def test_every_mask_of_a_sentence_is_filled(project_with_models):
    (example,) = fill_mask(["the [MASK] sat on the [MASK]"], top_k=2)
    assert len(example["per_mask"]) == 2 and example["predictions"] == example["per_mask"][0]
    assert all(len(fills) == 2 for fills in example["per_mask"])
    result = fill_mask_cli("the [MASK] sat on the [MASK]", "--top-k", "1")
    assert result.returncode == 0, result.stderr
    assert "[MASK] 1 of 2" in result.stdout and "[MASK] 2 of 2" in result.stdout


def test_a_variant_must_be_a_configured_one(project_with_models):
    outside = fill_mask_cli("the [MASK] sat", "--variant", "../../etc")
    assert outside.returncode == 2
    assert (
        "--variant: '../../etc' is not a mask_rate_comparison variant; the variants are mask_015, mask_030, mask_045"
        in outside.stderr
    )
    with pytest.raises(ValueError, match=r"--variant: 'mask_999' is not a mask_rate_comparison variant"):
        fill_mask(["the [MASK] sat"], variant="mask_999")
