"""Every `kedro run` and `bert-mlm` command that README.md and docs/*.md teach (in fenced blocks
and inline code) parses as the project's command line parses it, and names what exists: pipelines
in the registry, environments in conf/, namespaces of the pipeline, parameters that are fields of
the typed configuration with valid values (on top of the environment's own)."""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import click
import pytest
from kedro.config import OmegaConfigLoader
from kedro.framework.startup import bootstrap_project
from omegaconf import OmegaConf

from bert_mlm.cli import run as run_command
from bert_mlm.config import ExperimentConfig
from bert_mlm.config.describe import params_command
from bert_mlm.fill_mask import fill_mask_command
from bert_mlm.kedro_checks import check_selection
from bert_mlm.pipeline_registry import register_pipelines
from bert_mlm.pipelines.mask_rate_comparison import VARIANTS
from bert_mlm.settings import CONFIG_LOADER_ARGS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"(?<!`)`((?:[A-Z_]+=\S+ )*(?:kedro run|bert-mlm)\b[^`]*)`(?!`)")
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ +)*(kedro run|bert-mlm)\b")


def commands() -> list[tuple[str, str]]:
    """(where, command line) for each command in the pages' code."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in FENCE.finditer(text):
            number = text[: block.start()].count("\n") + 2
            lines = block.group(1).replace("\\\n", " ").splitlines()
            for offset, line in enumerate(lines):
                if COMMAND.match(line.strip()):
                    found.append((f"{page.name}:{number + offset}", line.strip()))
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for match in INLINE.finditer(prose):
            found.append((f"{page.name}:{prose[: match.start()].count(chr(10)) + 1}", match.group(1)))
    return found


def arguments(line: str) -> tuple[str, list[str]]:
    """The program and its arguments, without environment assignments, comments and redirections."""
    words = [w for w in shlex.split(line, comments=True) if not re.fullmatch(r"[A-Z_]+=\S*", w)]
    redirection = next((i for i, w in enumerate(words) if re.match(r"\d?>", w)), len(words))
    words = words[:redirection]
    if words[:2] == ["kedro", "run"]:
        return "run", words[2:]
    assert words[0] == "bert-mlm", line
    if words[1:2] == ["fill-mask"]:
        return "fill-mask", words[2:]
    if words[1:2] == ["params"]:
        return "params", words[2:]
    return "run", words[2:] if words[1:2] == ["run"] else words[1:]


PIPELINES = register_pipelines()


@pytest.fixture(scope="module", autouse=True)
def project() -> None:
    bootstrap_project(ROOT)  # check_selection reads the registry as a run sees it
ENVIRONMENTS = {p.name for p in (ROOT / "conf").iterdir() if p.is_dir()} | {"local"}
DOCUMENTED = commands()


def test_the_pages_teach_commands_and_never_the_deprecated_pipeline_option():
    assert len(DOCUMENTED) >= 30
    assert not [where for where, line in DOCUMENTED if re.search(r"--pipeline(\s|=)", line)]


def parameters(env: str | None, runtime: dict, tmp_path: Path) -> dict:
    """The merged parameters of ``env`` with ``runtime`` on top, as a run loads them; a fine-tuning
    file that is a placeholder in the docs (``reviews.csv``) stands in as a real one."""
    for key in ("train_path", "eval_path"):
        path = runtime.get("finetune", {}).get(key)
        if isinstance(path, str) and not (ROOT / path).is_file() and not Path(path).is_file():
            stand_in = tmp_path / Path(path).name
            stand_in.write_text("text,label\na,0\nb,1\n")
            runtime["finetune"][key] = str(stand_in)
        elif isinstance(path, str) and (ROOT / path).is_file():
            runtime["finetune"][key] = str(ROOT / path)
    # Kedro merges --params on top of the base's and the environment's parameters: with no interpolation in them,
    # that is --params on top of the environment's merged parameters, read once per environment (the loader parses
    # every file again each time: ~0.15 s a command). test_runtime_params_on_the_cached_parameters_are_kedros checks it.
    return OmegaConf.to_container(OmegaConf.unsafe_merge(environment_parameters(env), runtime))


@functools.cache
def environment_parameters(env: str | None) -> dict:
    """The merged parameters of ``env`` as a run loads them, without --params."""
    return loaded_parameters(env, {})


def loaded_parameters(env: str | None, runtime: dict) -> dict:
    loader = OmegaConfigLoader(str(ROOT / "conf"), env=env, runtime_params=runtime, **CONFIG_LOADER_ARGS)
    return dict(loader["parameters"])


@pytest.mark.parametrize("env", [None, *sorted(ENVIRONMENTS)])
def test_runtime_params_on_the_cached_parameters_are_kedros(env):
    runtime = {"training": {"max_steps": 3, "learning_rate": 0.001},
               "masking": {"probability": 0.3, "whole_word": True}, "corpus": {"path": "data/01_raw/新闻.txt"},
               "tuning": {"search_space": {"whole_word": [False, True]}}}
    merged = OmegaConf.to_container(OmegaConf.unsafe_merge(environment_parameters(env), runtime))
    assert merged == loaded_parameters(env, runtime)
    assert merged != environment_parameters(env) and merged["training"]["max_steps"] == 3


@pytest.mark.parametrize(("where", "line"), DOCUMENTED, ids=[where for where, _ in DOCUMENTED])
def test_a_documented_command_parses_and_names_what_exists(where, line, tmp_path):
    program, words = arguments(line)
    if program == "fill-mask" and not words:
        return  # a mention in prose ("`bert-mlm fill-mask` fills masks"), not a command
    command = {"run": run_command, "fill-mask": fill_mask_command, "params": params_command}[program]
    try:
        context = command.make_context(program, list(words), resilient_parsing=False)
    except click.exceptions.Exit:  # --help
        return
    if program != "run":
        return
    options = context.params
    names = list(options.get("pipelines") or []) or ["__default__"]
    unknown = [name for name in names if name not in PIPELINES]
    assert not unknown, f"{where}: no pipeline {unknown} in the registry ({sorted(PIPELINES)})"
    env = options.get("env")
    assert env is None or env in ENVIRONMENTS, f"{where}: no environment conf/{env}"
    check_selection(names, options)
    runtime = options.get("params") or {}
    ExperimentConfig.from_parameters(parameters(env, runtime, tmp_path), variants=VARIANTS)  # a bad one raises


def test_a_wrong_documented_command_would_fail(tmp_path):
    """The checks above can fail: a typo in a parameter, a value out of range, an unknown pipeline."""
    for line, error in (("kedro run --params trainig.max_steps=3", "trainig"),
                        ("kedro run --params masking.probability=1.5", "masking.probability"),
                        ("kedro run --pipelines tokenisation", "tokenisation")):
        with pytest.raises((AssertionError, Exception), match=error):
            test_a_documented_command_parses_and_names_what_exists("x", line, tmp_path)
