"""The run record (the ``run_config`` dataset): how a run was made, saved by every run that
tunes, trains, fine-tunes, evaluates or reports, under the run's own version.

It holds what no other output says: the sections the run used (masking and training as the
training stage took them from the tuning stage, the others as configured), ``--env``, the
``--params`` given, the pipelines and nodes run, the corpus and the token store it was encoded into
(version and digests) with the corpus's language, ``model.init_from``, the package's version and
git commit, the torch / transformers versions and the device. A report opens with the record of
the run that trained its model; the model card is written from it. Every value passes through the
one redaction (:func:`bert_mlm.core.common.redaction.redact`) before it is saved or shown.

Kedro-free: the hook gathers the run's facts (:func:`run_facts`), the ``record_run`` node adds what
the data and the tuning stage say (:func:`run_record`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bert_mlm.core.common.redaction import redact
from bert_mlm.core.common.text import cjk_characters

FORMAT = 1
SOFTWARE = ("torch", "transformers", "tokenizers", "kedro")
# The run options that select nodes, as `kedro run` spells them.
SELECTION = ("tags", "from_nodes", "to_nodes", "node_names", "from_inputs", "to_outputs", "namespaces")
LANGUAGE_SAMPLE_CHARS = 100_000
MAJORITY = 0.5  # "mostly": a share of the letters


def package_version() -> str | None:
    try:
        return importlib.metadata.version("bert_mlm")
    except importlib.metadata.PackageNotFoundError:
        import bert_mlm

        return getattr(bert_mlm, "__version__", None)


def git_commit(directory: str | Path | None = None) -> dict[str, Any] | None:
    """The commit the package's code was checked out at, and whether files tracked by git have
    changed since (``dirty``); None where the code is not in a git checkout (an installed wheel) or
    git is absent: a run never fails for the want of git."""
    directory = Path(directory) if directory is not None else Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def software_versions() -> dict[str, str | None]:
    """Python's and the main libraries' versions (read from their metadata: nothing is imported)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def describe_device(device) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if getattr(device, "type", None) == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)


def run_facts(run_params: Mapping[str, Any], sections: Mapping[str, Any], nodes: Iterable[str], device: str) -> dict:
    """What the run's hook knows and no node can: the run's id (the version of all it saves), how
    it was started, the configured sections (plain values), the nodes it runs, the code and the device."""
    return {
        "run_id": run_params.get("run_id"),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "env": run_params.get("env"),
        "params": dict(run_params.get("runtime_params") or {}),
        "pipelines": list(run_params.get("pipeline_names") or ["__default__"]),
        "selection": {key: list(value) for key in SELECTION if (value := run_params.get(key))},
        "load_versions": dict(run_params.get("load_versions") or {}),
        "nodes": sorted(nodes),
        "sections": dict(sections),
        "code": {"package": "bert_mlm", "version": package_version(), "git": git_commit()},
        "software": software_versions(),
        "device": device,
    }


def selection_flags(pipelines: Iterable[str], selection: Mapping[str, Iterable]) -> list[str]:
    """What a run selected, as `kedro run` options: ``--pipelines a,b``, ``--nodes x``, ``--tags t``..."""
    flags = [f"--pipelines {','.join(named)}"] if (named := [p for p in pipelines if p != "__default__"]) else []
    return flags + [f"--{key.replace('_', '-').replace('node-names', 'nodes')} {','.join(map(str, values))}"
                    for key, values in selection.items() if values]


def command_line(record: Mapping[str, Any]) -> str:
    """The ``kedro run`` command that makes the same run (the ``--params`` redacted)."""
    parts = ["kedro run"]
    if record.get("env"):
        parts.append(f"--env {record['env']}")
    parts += selection_flags(record.get("pipelines") or (), record.get("selection") or {})
    if record.get("load_versions"):
        parts.append("--load-versions " + ",".join(f"{k}:{v}" for k, v in record["load_versions"].items()))
    params = dotted(redact(record.get("params") or {}))
    if params:
        parts.append("--params " + ",".join(f"{key}={value}" for key, value in params.items()))
    return " ".join(parts)


def dotted(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(dotted(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def corpus_language(texts: Iterable[str]) -> str | None:
    """The corpus's language as a model card's front matter gives it, from its script: ``zh``
    where most letters are Han characters, ``ja`` or ``ko`` where kana or Hangul make up a good part
    of the CJK text, ``en`` where most letters are Latin; None (unknown) otherwise (Cyrillic, Arabic,
    an even mixture, no text)."""
    han = kana = hangul = latin = letters = 0
    for text in texts:
        for character in text:
            if not character.isalpha():
                continue
            letters += 1
            code = ord(character)
            if 0x3040 <= code <= 0x30FF:
                kana += 1
            elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF:
                hangul += 1
            elif cjk_characters(character):
                han += 1
            elif code < 0x250:  # Basic Latin to Latin Extended-B
                latin += 1
    if not letters:
        return None
    cjk = han + kana + hangul
    if cjk > MAJORITY * letters:
        if kana > 0.1 * cjk:
            return "ja"
        if hangul > MAJORITY * cjk:
            return "ko"
        return "zh"
    return "en" if latin > MAJORITY * letters else None


def run_record(facts: Mapping[str, Any], resolved: Mapping[str, Any], data: Mapping[str, Any]) -> dict:
    """The record of a run: its ``facts`` (:func:`run_facts`), with the masking and training
    sections the tuning stage resolved (``resolved``: plain sections, ``{}`` where none) in place
    of the configured ones when this run trains (what the model was trained with), and ``data``:
    the corpus and the token store the run read. Redacted."""
    trains = "train_masked_lm" in (facts.get("nodes") or ())
    sections = dict(facts.get("sections") or {})
    taken = []
    if trains:
        for name, section in resolved.items():
            if section:
                sections[name] = dict(section)
                taken.append(name)
    model = sections.get("model") or {}
    record = {
        "format": FORMAT,
        **{key: facts.get(key) for key in ("run_id", "started", "env", "params", "pipelines", "selection",
                                           "load_versions", "nodes")},
        "trained_model": facts.get("run_id") if trains else None,
        "init_from": model.get("init_from"),
        "corpus": dict(data),
        "sections": sections,
        "sections_from_tuning": taken,
        **{key: facts.get(key) for key in ("code", "software", "device")},
    }
    record["command"] = command_line(record)
    return redact(record)


def hub_datasets(corpus: Mapping[str, Any]) -> list[str]:
    """The Hugging Face Hub datasets a corpus section reads (``hf_dataset`` names, ``hf://datasets/``
    paths, in a mixture too): a model card's ``datasets``. Local files are no Hub id."""
    found: list[str] = []

    def visit(settings: Mapping[str, Any]) -> None:
        hf = settings.get("hf_dataset")
        name = hf if isinstance(hf, str) else (hf or {}).get("name") if isinstance(hf, Mapping) else None
        if name:
            found.append(str(name))
        path = settings.get("path")
        if isinstance(path, str) and path.startswith("hf://datasets/"):
            found.append("/".join(path.removeprefix("hf://datasets/").split("/")[:2]).split("@")[0])
        for part in (settings.get("sources") or {}).values():
            if isinstance(part, Mapping):
                visit(part)

    visit(corpus)
    return list(dict.fromkeys(found))


def describe_code(code: Mapping[str, Any] | None) -> str:
    """``bert_mlm 0.1, git 1a2b3c4d5e6f (with uncommitted changes)``."""
    code = code or {}
    git = code.get("git") or {}
    commit = f", git {git['commit'][:12]}" if git.get("commit") else ", not in a git checkout"
    dirty = " (with uncommitted changes)" if git.get("dirty") else ""
    return f"{code.get('package', 'bert_mlm')} {code.get('version') or '?'}{commit}{dirty}"


def describe_software(software: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{name} {version}" for name, version in (software or {}).items() if version)


def token_store_line(corpus: Mapping[str, Any]) -> str:
    store = corpus.get("token_store") or {}
    digests: Sequence = [f"{split} {digest}" for split, digest in (store.get("digests") or {}).items()]
    return f"version {store.get('version') or '?'}; digests {', '.join(digests) or 'n/a'}"


def sources_line(corpus: Mapping[str, Any]) -> str | None:
    """A mixture's sources as stored and drawn: ``news: 120 documents, 50,000 tokens, weight 0.7;
    ...``; None outside a mixture."""
    sources = corpus.get("sources")
    if not sources:
        return None
    return "; ".join(
        f"{source['name']}: {source.get('documents', '?')} documents, {source.get('tokens', 0):,} tokens"
        + "".join(f", {key} {source[key]}" for key in ("weight", "repeat") if source.get(key) is not None)
        for source in sources)

