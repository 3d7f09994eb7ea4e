"""Kedro-level mistakes (an unknown pipeline, node, tag, runner or environment, a missing
``--load-versions`` version or credentials entry, inputs no earlier run wrote), found before Kedro
trips over them, each in one line that says what to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bert_mlm.errors import UserError, causes, did_you_mean

DEFAULT_ENV = "local"  # settings.CONFIG_LOADER_ARGS["default_run_env"]


def _env(env: str | None) -> str:
    """The run's environment: ``--env``, else ``KEDRO_ENV``, else Kedro's default."""
    return env or os.environ.get("KEDRO_ENV") or DEFAULT_ENV


def _conf(conf_source: str | None, project: Path | None) -> Path:
    from kedro.framework.project import settings

    conf = Path(conf_source or settings.CONF_SOURCE)
    return conf if conf.is_absolute() else (project or Path.cwd()) / conf


def check_selection(pipeline_names: Iterable[str], options: Mapping[str, Any]) -> None:
    """Every ``--pipelines``, ``--nodes`` (``--from-nodes``, ``--to-nodes``), ``--tags``,
    ``--namespaces`` and ``--runner`` name is known (Kedro's own messages come after a traceback, and
    an unknown tag among known ones Kedro ignores silently)."""
    from kedro.framework.project import pipelines

    names = [name for name in pipeline_names if name] or ["__default__"]
    for name in names:
        if name not in pipelines:
            raise UserError(f"--pipelines: {name!r} is not a pipeline of this project; "
                            f"{did_you_mean(name, pipelines)}the pipelines are {', '.join(sorted(pipelines))}")
    chosen = [pipelines[name] for name in names]
    where = f"the pipeline {names[0]!r}" if len(names) == 1 else f"the pipelines {names}"
    nodes = sorted({node.name for pipeline in chosen for node in pipeline.nodes})
    for option, key in (("--nodes", "node_names"), ("--from-nodes", "from_nodes"), ("--to-nodes", "to_nodes")):
        for name in options.get(key) or ():
            if name not in nodes:
                raise UserError(f"{option}: {name!r} is not a node of {where}; {did_you_mean(name, nodes)}its nodes: "
                                f"{', '.join(nodes)}")
    tags = sorted({tag for pipeline in chosen for node in pipeline.nodes for tag in node.tags})
    for tag in options.get("tags") or ():
        if tag not in tags:
            known = f"its tags: {', '.join(tags)}" if tags else "its nodes carry no tags (use --nodes or --pipelines)"
            raise UserError(f"--tags: {tag!r} is not a tag of {where}; {known}")
    # A namespace and each of its prefixes (mask_030.training names mask_030 too).
    spaces = sorted({".".join(node.namespace.split(".")[:end]) for pipeline in chosen for node in pipeline.nodes
                     if node.namespace for end in range(1, node.namespace.count(".") + 2)})
    unknown = [name for name in options.get("namespaces") or () if name not in spaces]
    if unknown:
        raise UserError(f"--namespaces: {', '.join(map(repr, unknown))} is not a namespace of {where}; its namespaces: "
                        f"{', '.join(spaces) or 'none'}")
    runner = options.get("runner")
    if runner:
        from kedro.utils import load_obj

        try:
            load_obj(runner, "kedro.runner")
        except (AttributeError, ImportError, ValueError) as error:
            raise UserError(f"--runner: {runner!r} is not a Kedro runner ({type(error).__name__}: {error}); use "
                            "SequentialRunner, ThreadRunner or ParallelRunner, or the dotted path of a runner "
                            "class") from error


def check_load_versions(catalog, load_versions: Mapping[str, str] | None) -> None:
    """Each ``--load-versions name:version`` names a versioned dataset and one of its versions."""
    for name, version in (load_versions or {}).items():
        try:
            dataset = catalog.get(name)
        except Exception:  # noqa: BLE001 - Kedro raises several types for an unknown name
            dataset = None
        folder = getattr(dataset, "_filepath", None)
        if folder is None:
            raise UserError(f"--load-versions: {name!r} is not a versioned dataset of the catalog")
        folder = Path(str(folder))
        if not (folder / version).exists():
            versions = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
            shown = ", ".join(versions[-5:]) if versions else "none: no run has written it yet"
            raise UserError(f"--load-versions: {name}:{version} is not a version of {name} ({_relative(folder)}); "
                            f"its newest versions: {shown}")


def kedro_mistake(error: BaseException, env: str | None = None, conf_source: str | None = None,
                  project: Path | None = None) -> UserError | None:
    """A Kedro error that is the user's to fix (invalid YAML, named by its file where YAML says
    "<file>"; a key given twice; a mapping against a list; a dataset the catalog lacks) as one
    line; ``None`` for anything else (a bug keeps its traceback)."""
    import yaml
    from kedro.config import MissingConfigException
    from kedro.io.core import DatasetNotFoundError

    for cause in causes(error):
        text = " ".join(str(cause).split())
        if isinstance(cause, yaml.YAMLError):
            where = getattr(cause, "problem_mark", None)
            if where is None:  # Kedro's own ParserError: its text names the file and the line
                return UserError(f"conf: {text}")
            file = _yaml_file_failing_at(where, conf_files(env, conf_source, project)) if "<file>" in text else None
            return UserError(f"{_relative(file) if file else 'conf'}: {cause.problem} (line {where.line + 1}, column "
                             f"{where.column + 1})")
        if isinstance(cause, (MissingConfigException, DatasetNotFoundError)):
            return UserError(f"conf: {text}")
        if isinstance(cause, ValueError) and text.startswith("Duplicate keys found"):
            return UserError(f"conf: {text}; an environment may set a key once (conf/base and the run environment "
                             "may each set it: the environment's value wins)")
        if "Cannot merge incompatible container types" in text:
            return merge_conflict(env, conf_source, project)
    return None


def conf_files(env: str | None, conf_source: str | None, project: Path | None) -> dict[str, list[Path]]:
    """The YAML files of conf/base and of the run's environment, by environment."""
    conf = _conf(conf_source, project)
    return {folder: sorted((conf / folder).rglob("*.y*ml")) if (conf / folder).is_dir() else []
            for folder in dict.fromkeys(("base", _env(env)))}


def _yaml_file_failing_at(where, files: dict[str, list[Path]]) -> Path | None:
    """The file whose YAML fails to load at the line and column of ``where``."""
    from omegaconf import OmegaConf

    for path in (path for paths in files.values() for path in paths):
        try:
            OmegaConf.load(path)
        except Exception as error:  # noqa: BLE001 - any failure at the same place is the one
            mark = getattr(error, "problem_mark", None)
            if mark is not None and (mark.line, mark.column) == (where.line, where.column):
                return path
    return None


def merge_conflict(env: str | None, conf_source: str | None, project: Path | None) -> UserError:
    """OmegaConf's "Cannot merge incompatible container types" (77 lines naming neither file nor
    key) as one line naming the key and both files."""
    import yaml

    def containers(paths: list[Path]) -> dict[tuple[str, ...], tuple[type, Path]]:
        found = {}

        def walk(value, path: tuple[str, ...], file: Path) -> None:
            if isinstance(value, (dict, list)) and path:
                found[path] = (dict if isinstance(value, dict) else list, file)
            for key, item in value.items() if isinstance(value, dict) else ():
                walk(item, (*path, str(key)), file)

        for file in paths:
            try:
                walk(yaml.safe_load(file.read_text(encoding="utf-8")) or {}, (), file)
            except (OSError, yaml.YAMLError):
                continue
        return found

    files = conf_files(env, conf_source, project)
    base, *rest = files.values()
    base = containers(base)
    for path, (kind, file) in containers(rest[0] if rest else []).items():
        if path in base and base[path][0] is not kind:
            names = {dict: "a mapping", list: "a list"}
            return UserError(f"{_relative(file)}: {'.'.join(path)} is {names[kind]} where {_relative(base[path][1])} "
                             f"has {names[base[path][0]]}; an environment overrides keys, so give it the same form")
    return UserError("conf: Cannot merge incompatible container types: a key is a mapping in one environment and a "
                     "list in another")


def check_no_globals_file(conf_source: str | Path, env: str | None) -> None:
    """A ``globals.yml`` is not read (the settings load the parameters as globals): its
    ``corpus.path`` (where earlier versions kept it) would be ignored, silently."""
    conf = Path(conf_source)
    for folder in dict.fromkeys(("base", _env(env))):
        for path in sorted((conf / folder).glob("globals*.y*ml")) if (conf / folder).is_dir() else []:
            raise UserError(f"{_relative(path)}: globals files are not read: the corpus settings (corpus.path, "
                            f"corpus.sources, ...) live in the parameters; move its keys to "
                            f"conf/{folder}/parameters_corpus.yml (or any parameters*.yml there)")


def check_environment(env: str | None, conf_source: str | None, project: Path) -> None:
    """``--env`` (or ``KEDRO_ENV``) names a folder of the configuration."""
    env, conf = env or os.environ.get("KEDRO_ENV"), _conf(conf_source, project)
    # Not a folder: a packaged (.tar.gz / .zip) configuration, which Kedro checks itself.
    if env and conf.is_dir() and not (conf / env).is_dir():
        environments = sorted(p.name for p in conf.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
        raise UserError(f"--env: {env!r} is not an environment of this project (no folder {str(conf / env)!r}); "
                        f"{did_you_mean(env, environments)}the environments are {', '.join(environments)}")


def check_credentials(catalog_config: Mapping[str, Any], credentials: Mapping[str, Any], env: str | None) -> None:
    """Every ``credentials: <name>`` of the catalog (nested mixture sources included, as Kedro
    resolves them) names an entry of the credentials files read under ``env``."""
    for dataset, config in catalog_config.items():
        for where, name in _credential_names(config, ()):
            if name not in credentials:
                setting = _setting(dataset, where)
                other = "" if (env or DEFAULT_ENV) == DEFAULT_ENV else (
                    f"; under --env {env} conf/local is not read, so an entry in conf/local/credentials.yml is not "
                    f"seen: copy it to conf/{env}/credentials.yml (kept out of git like conf/local)")
                known = ", ".join(map(repr, sorted(credentials))) or "none"
                # Kedro reads conf/base and the run environment, never both that and conf/local.
                raise UserError(f"{setting}: {name!r} is not an entry of the credentials (conf/base/credentials.yml "
                                f"and conf/{_env(env)}/credentials.yml; their entries: {known}){other}")


def _credential_names(config: Any, path: tuple[str, ...]):
    if isinstance(config, Mapping):
        for key, value in config.items():
            if key == "credentials" and isinstance(value, str):
                yield path, value
            else:
                yield from _credential_names(value, (*path, str(key)))


def _setting(dataset: str, path: tuple[str, ...]) -> str:
    """How the user set it: ``corpus.credentials``, ``corpus.sources.books.credentials``, or the
    catalog entry."""
    if dataset in ("raw_corpus", "extra_eval_corpus"):
        return ".".join(("corpus", *path, "credentials"))
    return f"catalog entry {dataset!r}: {'.'.join((*path, 'credentials'))}"


def check_inputs_written(pipeline, catalog, pipelines: Mapping[str, Any], run: str) -> None:
    """A pipeline run on its own (``--pipelines training`` in a fresh clone): what it reads that no
    run wrote and which pipelines to run first, before any node runs (Kedro says so only when the
    node that needs it starts)."""
    from bert_mlm.pipeline_registry import CHAIN

    producers = {name: pipelines[name] for name in CHAIN if name in pipelines}
    # An optional result (it loads empty before any run wrote it) is missing only where a stage's
    # own node reads it: the reporting nodes that follow a partial run report without it.
    # `--pipelines reporting` alone reports on a model that was evaluated.
    stage_reads = _stage_reads(pipeline, pipelines) or {"evaluation_metrics"}
    missing = sorted((name for name in pipeline.inputs()
                      if _produced(name, producers) and not _written(catalog, name, name in stage_reads)),
                     key=lambda name: (name not in stage_reads, name))  # the stage's own inputs first
    if not missing:
        return
    needed = _pipelines_to_run(missing, catalog, producers, pipelines)
    shown = ", ".join(f"{name} ({_where(catalog, name)})" for name in missing[:4])
    shown += " ..." if len(missing) > 4 else ""
    raise UserError(f"{run}: it reads {shown}, which no earlier run has written; run `kedro run --pipelines "
                    f"{','.join(needed)}` first (or the whole chain: `kedro run`)")


def _produced(dataset: str, producers: Mapping[str, Any]) -> bool:
    return not dataset.startswith("params:") and dataset != "parameters" and any(
        dataset in p.all_outputs() for p in producers.values())


def _written(catalog, name: str, required: bool = True) -> bool:
    try:
        dataset = catalog.get(name)
    except Exception:  # noqa: BLE001 - not a catalog entry: a memory dataset, made by the run
        return True
    if dataset is None or type(dataset).__name__ == "MemoryDataset":
        return True  # made by the run
    if getattr(dataset, "optional", False) and not required:
        return True  # a result that loads as empty before any run wrote it, read by the reporting nodes only
    try:
        return bool(dataset.exists())
    except Exception:  # noqa: BLE001 - a dataset that cannot tell: leave it to its load
        return True


def _stage_reads(pipeline, pipelines: Mapping[str, Any]) -> set[str]:
    """What the pipeline's nodes other than the reporting ones read."""
    reporting = {node.name for node in pipelines["reporting"].nodes} if "reporting" in pipelines else set()
    return {name for node in pipeline.nodes if node.name not in reporting for name in node.inputs}


def _pipelines_to_run(missing: list[str], catalog, producers: Mapping[str, Any],
                      pipelines: Mapping[str, Any]) -> list[str]:
    """The chain's pipelines that write ``missing`` and, recursively, what those miss, in order."""
    needed: set[str] = set()
    todo = list(missing)
    while todo:
        dataset = todo.pop()
        for name, pipeline in producers.items():
            if dataset in pipeline.all_outputs() and name not in needed:
                needed.add(name)
                reads = _stage_reads(pipeline, pipelines)
                todo += [d for d in pipeline.inputs()
                         if _produced(d, producers) and not _written(catalog, d, d in reads)]
                break
    return [name for name in producers if name in needed]


def described_run(run_params: Mapping[str, Any]) -> str:
    """How the user chose what runs, for messages: ``--pipelines training``, ``--from-nodes x``."""
    from bert_mlm.core.record.run_record import SELECTION, selection_flags

    flags = selection_flags(run_params.get("pipeline_names") or (), {key: run_params.get(key) for key in SELECTION})
    return " ".join(flags) or "kedro run"


def _where(catalog, name: str) -> str:
    try:
        return _relative(Path(str(getattr(catalog.get(name), "_filepath", None) or name)))
    except Exception:  # noqa: BLE001 - only for the message
        return name


def _relative(path: Path) -> str:
    here = Path.cwd()
    return str(path.relative_to(here)) if path.is_absolute() and path.is_relative_to(here) else str(path)
