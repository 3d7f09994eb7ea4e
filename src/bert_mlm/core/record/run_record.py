"""The run record (the ``run_config`` dataset): how a run was made, saved under the run's version
by every run that tunes, trains, fine-tunes, evaluates or reports.

It holds what no other output says: the sections the run used (masking and training as training
took them from the tuning stage), ``--env``, ``--params``, the pipelines and nodes run, the corpus
and its token store (version, digests, language), the code's version and git commit, the software
versions and the device. A report opens with the record of the run that trained its model; the
model card is written from it. Every value is redacted (:func:`bert_mlm.core.common.redaction.redact`).

The hook gathers the run's facts (:func:`run_facts`), the ``record_run`` node adds what the data and
the tuning stage say (:func:`run_record`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
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


def installed_version(name: str) -> str | None:
    """A distribution's version, read from its metadata (nothing is imported); None where it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe_device(device) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if getattr(device, "type", None) == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)


def run_facts(run_params: Mapping[str, Any], sections: Mapping[str, Any], nodes: Iterable[str],
              device: str) -> RunRecord:
    """What the run's hook knows and no node can: the run's id, how it was started, the configured
    sections (plain values), the nodes it runs, the code and the device."""
    from bert_mlm import __version__

    return RunRecord(
        run_id=run_params.get("run_id"), started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        env=run_params.get("env"), params=dict(run_params.get("runtime_params") or {}),
        pipelines=list(run_params.get("pipeline_names") or ["__default__"]),
        selection={key: list(value) for key in SELECTION if (value := run_params.get(key))},
        load_versions=dict(run_params.get("load_versions") or {}), nodes=sorted(nodes), sections=dict(sections),
        code={"package": "bert_mlm", "version": installed_version("bert_mlm") or __version__, "git": git_commit()},
        software={"python": platform.python_version(), **{name: installed_version(name) for name in SOFTWARE}},
        device=device)


def selection_flags(pipelines: Iterable[str], selection: Mapping[str, Iterable]) -> list[str]:
    """What a run selected, as `kedro run` options: ``--pipelines a,b``, ``--nodes x``, ``--tags t``..."""
    flags = [f"--pipelines {','.join(named)}"] if (named := [p for p in pipelines if p != "__default__"]) else []
    return flags + [f"--{key.replace('_', '-').replace('node-names', 'nodes')} {','.join(map(str, values))}"
                    for key, values in selection.items() if values]


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


@dataclass(frozen=True)
class DataRecord:
    """The corpus a run read (its source, language, documents per split and their version) and
    the token store it was encoded into (``token_store``: its version and digests); a mixture's
    ``sources``: each source's documents and tokens in the store, and its weight or repeat."""

    source: str | None = None
    language: str | None = None
    documents: dict[str, int] = field(default_factory=dict)
    documents_version: str | None = None
    token_store: dict[str, Any] = field(default_factory=dict)
    sources: list[dict[str, Any]] | None = None

    @property
    def token_store_line(self) -> str:
        digests = [f"{split} {digest}" for split, digest in (self.token_store.get("digests") or {}).items()]
        return f"version {self.token_store.get('version') or '?'}; digests {', '.join(digests) or 'n/a'}"

    @property
    def sources_line(self) -> str | None:
        """``news: 120 documents, 50,000 tokens, weight 0.7; ...``; None outside a mixture."""
        if not self.sources:
            return None
        return "; ".join(
            f"{source['name']}: {source.get('documents', '?')} documents, {source.get('tokens', 0):,} tokens"
            + "".join(f", {key} {source[key]}" for key in ("weight", "repeat") if source.get(key) is not None)
            for source in self.sources)


@dataclass(frozen=True)
class RunRecord:
    """How a run was made (the ``run_config`` dataset): see the module. ``sections``: every section
    as the run used it (plain values); ``sections_from_tuning``: those training took from the
    tuning stage. Redacted when it is made (:func:`run_record`) and again when it is saved."""

    run_id: str | None = None
    started: str | None = None
    env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    pipelines: list[str] = field(default_factory=lambda: ["__default__"])
    selection: dict[str, list] = field(default_factory=dict)
    load_versions: dict[str, str] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    trained_model: str | None = None
    init_from: str | None = None
    corpus: DataRecord = field(default_factory=DataRecord)
    sections: dict[str, Any] = field(default_factory=dict)
    sections_from_tuning: list[str] = field(default_factory=list)
    code: dict[str, Any] = field(default_factory=dict)
    software: dict[str, str | None] = field(default_factory=dict)
    device: str | None = None
    command: str = ""  # the `kedro run` command that makes the same run
    format: int = FORMAT

    @property
    def trains(self) -> bool:
        """Whether the run trains a model (its training node runs)."""
        return "train_masked_lm" in self.nodes

    def section(self, name: str) -> dict[str, Any]:
        return self.sections.get(name) or {}

    def command_line(self) -> str:
        """``kedro run --env ... --pipelines ... --params ...`` (the ``--params`` redacted)."""
        parts = ["kedro run", *([f"--env {self.env}"] if self.env else []),
                 *selection_flags(self.pipelines, self.selection)]
        if self.load_versions:
            parts.append("--load-versions " + ",".join(f"{k}:{v}" for k, v in self.load_versions.items()))
        if params := dotted(redact(self.params)):
            parts.append("--params " + ",".join(f"{key}={value}" for key, value in params.items()))
        return " ".join(parts)

    @property
    def code_line(self) -> str:
        """``bert_mlm 0.1, git 1a2b3c4d5e6f (with uncommitted changes)``."""
        git = self.code.get("git") or {}
        commit = f", git {git['commit'][:12]}" if git.get("commit") else ", not in a git checkout"
        dirty = " (with uncommitted changes)" if git.get("dirty") else ""
        return f"{self.code.get('package', 'bert_mlm')} {self.code.get('version') or '?'}{commit}{dirty}"

    @property
    def software_line(self) -> str:
        return ", ".join(f"{name} {version}" for name, version in self.software.items() if version)

    def to_json(self) -> dict[str, Any]:
        return redact(asdict(self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A stored record (one of an earlier version too: its command is made again where it has none)."""
        known = {f.name for f in fields(cls)} - {"corpus"}
        corpus = {k: v for k, v in (data.get("corpus") or {}).items() if k in {f.name for f in fields(DataRecord)}}
        record = cls(**{k: v for k, v in data.items() if k in known and v is not None}, corpus=DataRecord(**corpus))
        return record if record.command else replace(record, command=record.command_line())


def run_record(facts: RunRecord, resolved: Mapping[str, Any], data: DataRecord) -> RunRecord:
    """``facts`` (:func:`run_facts`) with ``data`` (the corpus and token store read) and, when this
    run trains, the sections the tuning stage resolved (``resolved``; ``{}``: none) in place of the
    configured ones. Redacted."""
    trains = facts.trains
    taken = [name for name, section in resolved.items() if trains and section]
    sections = {**facts.sections, **{name: dict(resolved[name]) for name in taken}}
    record = replace(facts, trained_model=facts.run_id if trains else None, corpus=data, sections=sections,
                     init_from=(sections.get("model") or {}).get("init_from"), sections_from_tuning=taken)
    return RunRecord.from_json(record.to_json())  # redacted, with its command


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
