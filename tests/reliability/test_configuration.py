"""Every bad parameter is refused before any work, with one message naming it and its value."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
import torch
from kedro.config import OmegaConfigLoader

from bert_mlm.core.common.device import resolve_precision
from bert_mlm.errors import UserError
from bert_mlm.hooks.validation import validate_parameters
from tests.reliability.conftest import mount_tmpfs


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


def test_auto_precision_is_fp32_on_cpu_and_not_logged_at_every_call(base_parameters, caplog):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with caplog.at_level("INFO"):
        validate_parameters(with_override(base_parameters, "training.precision", "auto"))
        assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert "fp32" not in caplog.text  # the run's plan says it once (tests/test_logs.py)


@pytest.mark.parametrize("env", ["smoke", "gpu", "zh"])
def test_every_shipped_environment_is_valid(project_root, env, monkeypatch):
    if env == "gpu":  # resolving the device would refuse cuda here; the rest must hold
        monkeypatch.setattr("bert_mlm.hooks.validation.resolve_device", lambda requested: torch.device("cpu"))
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env=env,
                               merge_strategy={"parameters": "soft"})
    validate_parameters(dict(loader["parameters"]))


# ----------------------------------------------------------------------------- model.init_from
@pytest.fixture(scope="module")
def starting_model(tmp_path_factory):
    """A saved model directory with its tokenizer, as continued pretraining starts from."""
    from bert_mlm.config import ModelConfig, TokenizerConfig
    from bert_mlm.core.model.bert import build_model
    from bert_mlm.core.tokens.tokenizer import train_wordpiece

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
    from bert_mlm.core.model.bert import resolve_checkpoint

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
    from transformers import BertConfig

    from bert_mlm.core.model.bert import step_estimate

    def estimate(batch, length):
        shape = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
                           vocab_size=8192, max_position_embeddings=length)
        return step_estimate(shape, batch, length)

    assert estimate(8, 1024) == pytest.approx(0.77e9, rel=0.25)
    assert estimate(32, 128) == pytest.approx(0.24e9, rel=0.25)
    assert estimate(1, 100000) > 50 * estimate(1, 10000) > 0


def _damaged_copy(directory, tmp_path, damage):
    """A copy of the model at ``directory`` with one kind of damage."""
    import shutil

    from transformers import BertForMaskedLM

    broken = tmp_path / damage.replace(" ", "_")
    shutil.copytree(directory, broken)
    weights = broken / "model.safetensors"
    if damage == "truncated safetensors":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "config of another size":
        config = json.loads((broken / "config.json").read_text())
        (broken / "config.json").write_text(json.dumps({**config, "hidden_size": 64, "intermediate_size": 128}))
    elif damage == "config not json":
        (broken / "config.json").write_text('{"model_type": "bert",')
    elif damage == "tokenizer truncated":
        (broken / "tokenizer.json").write_text((broken / "tokenizer.json").read_text()[:200])
    elif damage == "no tokenizer":
        for path in broken.iterdir():
            if path.name.startswith(("tokenizer", "vocab", "special_tokens")):
                path.unlink()
    elif damage in ("pickled bin", "truncated bin", "sharded index missing a shard"):
        state = BertForMaskedLM.from_pretrained(str(broken)).state_dict()
        weights.unlink()
        if damage == "sharded index missing a shard":
            (broken / "model.safetensors.index.json").write_text(json.dumps(
                {"weight_map": {key: "model-00001-of-00002.safetensors" for key in state}}))
            return broken
        if damage == "pickled bin":
            state["cls.predictions.extra"] = Exploit()
        torch.save(state, broken / "pytorch_model.bin")
        if damage == "truncated bin":
            data = (broken / "pytorch_model.bin").read_bytes()
            (broken / "pytorch_model.bin").write_bytes(data[: len(data) // 3])
    return broken


class Exploit:
    """What a planted pickle holds: unpickling it would run a shell command."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/bert-mlm-exploited",))


BROKEN_MODELS = {
    "truncated safetensors": r"the weights '.*model\.safetensors' are unreadable \(.*; truncated, or not a safetensors "
                             r"file\?\)",
    "pickled bin": r"'.*pytorch_model\.bin' is a pickle that names code or objects other than tensors, which the "
                   r"weights-only loader refuses",
    "truncated bin": r"the weights '.*pytorch_model\.bin' are unreadable \(.*; truncated\?\)",
    "config not json": r"'.*config\.json' is not a readable model config",
    "config of another size": r"the weights of '.*' do not fit its config\.json: '.*' has shape \[(\d+, )?32\], "
                              r"the config makes it \[(\d+, )?64\]",
    "sharded index missing a shard": r"'.*model\.safetensors\.index\.json' lists 1 weight file\(s\), of which "
                                     r"'model-00001-of-00002\.safetensors' is missing",
    "tokenizer truncated": r"the tokenizer files of '.*' are unreadable \(.*\); restore them, or give the model's "
                           r"vocabulary as tokenizer\.vocab_path",
    "no tokenizer": r"'.*' has no usable tokenizer \(.*neither a tokenizer\.json nor a vocab\.txt\); give the "
                    r"model's vocabulary as tokenizer\.vocab_path",
}


@pytest.mark.parametrize("damage", list(BROKEN_MODELS))
def test_a_broken_starting_model_is_one_line_before_the_data_stages(base_parameters, starting_model, tmp_path,
                                                                     damage):
    """Before: ingestion, tokenization and sequences ran, then "tuning: 2 consecutive trials failed" (218-238 lines)."""
    broken = _damaged_copy(starting_model[0], tmp_path, damage)
    with pytest.raises(UserError, match=rf"^model\.init_from: {BROKEN_MODELS[damage]}") as info:
        validate_parameters(with_override(base_parameters, "model.init_from", str(broken)))
    assert "\n" not in str(info.value)
    assert not Path("/tmp/bert-mlm-exploited").exists()
    validate_parameters(with_override(base_parameters, "model.init_from", str(starting_model[0])))  # the intact one


def test_a_broken_starting_model_stops_the_run_before_any_data_stage(project_copy, starting_model, tmp_path):
    from tests.kedro_runs import kedro_cli

    broken = _damaged_copy(starting_model[0], tmp_path, "truncated safetensors")
    result = kedro_cli(project_copy, "--params", f"model.init_from={broken}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: model.init_from: the weights '{broken}")
    assert not (project_copy / "data" / "02_intermediate").exists()


def test_an_unwritable_checkpoint_folder_is_refused_before_training(base_parameters, tmp_path):
    parameters = with_override(base_parameters, "training.checkpoint_every", 5)
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(UserError, match=rf"^training\.checkpoint_dir: '{file}/checkpoints' cannot be a folder: "
                                        rf"'{file}' is a file$"):
        validate_parameters(with_override(parameters, "training.checkpoint_dir", str(file / "checkpoints")))
    read_only = read_only_folder(tmp_path / "ro")
    with pytest.raises(UserError, match=rf"^training\.checkpoint_dir: '{read_only}/run' cannot be written "
                                        rf"\((Read-only file system|Permission denied) in '{read_only}'\); point "
                                        r"training\.checkpoint_dir to a writable folder, or set "
                                        r"training\.checkpoint_every=0"):
        validate_parameters(with_override(parameters, "training.checkpoint_dir", str(read_only / "run")))
    # Without checkpoints (and no resume) the folder is not used, so not checked.
    without = with_override(base_parameters, "training.checkpoint_every", 0)
    validate_parameters(with_override(without, "training.checkpoint_dir", str(read_only / "run")))


def read_only_folder(path):
    """A folder this process cannot write: its permission bits, or (as root, whom they do not stop) a
    read-only tmpfs mounted there."""

    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o500)
        return path
    READ_ONLY_MOUNTS.append(mount_tmpfs(path, "size=1m,ro"))
    return path


READ_ONLY_MOUNTS: list = []


@pytest.fixture(autouse=True)
def _unmount_read_only_folders():
    yield
    import subprocess

    while READ_ONLY_MOUNTS:
        subprocess.run(["umount", str(READ_ONLY_MOUNTS.pop())], capture_output=True)


def test_a_checkpoint_folder_without_room_or_under_a_file_size_limit_is_refused(tmp_path):
    """The estimate (fp32 weights and AdamW's two moments) against the free space, and against ulimit -f (set on
    this process for the length of the check)."""
    import resource
    import shutil

    from transformers import BertConfig, BertForMaskedLM

    from bert_mlm.core.model.checkpoints import check_checkpoint_dir, checkpoint_bytes

    config = BertConfig(vocab_size=8192, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512)
    needed = checkpoint_bytes(config)
    parameters = sum(p.numel() for p in BertForMaskedLM(config).parameters())
    assert needed == pytest.approx(16 * parameters, rel=0.2)  # 4 bytes of weights (tied: twice) + 8 of moments
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(UserError, match=rf"^training\.checkpoint_dir: '{tmp_path}' has [\d,.]+ GB free, but one "
                                        r"checkpoint of this model needs about [\d,.]+ GB"):
        check_checkpoint_dir(tmp_path, free * 2)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, limits[1]))
    try:
        with pytest.raises(UserError) as info:
            check_checkpoint_dir(tmp_path, needed)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    assert str(info.value).startswith(
        "training.checkpoint_dir: the file-size limit of this process (ulimit -f) is 1.0 MB, but a checkpoint of this "
        f"model writes a file of about {needed / 1e6:,.1f} MB")
    check_checkpoint_dir(tmp_path, needed)


def test_a_batch_larger_than_memory_allows_is_left_to_the_count_of_sequences(base_parameters, caplog, monkeypatch):
    """training.batch_size=100000 on the smoke corpus (748 training sequences: 1.3 GB) was refused up front with
    "needs about 38.8 GB": before the data exist, only what one sequence needs is a reason to stop; the rest is
    warned about and checked exactly once the sequences are counted (core.train.loop)."""
    import logging

    from bert_mlm.core.model import bert as model

    monkeypatch.setattr(model, "available_memory", lambda device: (int(20e9), "available RAM"))
    parameters = with_override(base_parameters, "training.batch_size", 100000)
    for dotted, value in (("sequences.max_length", 64), ("model.hidden_size", 32), ("model.intermediate_size", 64),
                          ("model.max_position_embeddings", 64), ("model.num_hidden_layers", 1),
                          ("tokenizer.vocab_size", 1000)):
        parameters = with_override(parameters, dotted, value)  # the smoke environment's model
    with caplog.at_level(logging.WARNING, logger="bert_mlm.hooks"):
        validate_parameters(parameters)
    assert re.search(r"training\.batch_size=100000: a step of that many sequences of 64 tokens would need about "
                     r"38\.8 GB but 20\.0 GB is left \(available RAM\); a step holds at most the train split's "
                     r"sequences, so this is checked again once they are counted, before training", caplog.text)
    # Once counted: 748 sequences fit; 200,000 would not, and the message says what the step holds.
    from transformers import BertConfig

    config = BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    assert model.check_step_memory(config, 100000, 64, torch.device("cpu"), sequences=748) < 2e9
    with pytest.raises(UserError, match=r"one training step of training\.batch_size=100000 sequences of 64 tokens "
                                        r"needs about 38\.8 GB"):
        model.check_step_memory(config, 100000, 64, torch.device("cpu"), sequences=200000)
    with pytest.raises(UserError, match=r"one training step of 90000 sequences \(all of the train split; "
                                        r"training\.batch_size=100000\) of 64 tokens needs about 3\d\.\d GB"):
        model.check_step_memory(config, 100000, 64, torch.device("cpu"), sequences=90000)
