"""The package's import graph has no cycle: a cycle makes the import order decide which names exist
(an ``ImportError`` on a partly initialised module) and hides which module is the lower layer.

The graph is read from the source with ``ast``, not by importing: every ``import`` and
``from ... import`` of a ``bert_mlm`` module counts, inside functions and under ``TYPE_CHECKING``
too, since a deferred import only postpones the cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = "bert_mlm"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE


def module_names(root: Path = SOURCE) -> dict[str, Path]:
    """Dotted module name -> file, packages by their ``__init__.py``."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` imports: for ``from a.b import c``, ``a.b.c`` when it is
    a module, else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                found.add(f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin)
    return {module for module in found if module in modules and module != name}


def import_graph(root: Path = SOURCE) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that ends where it starts, or None (depth-first search)."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph.get(module, ())):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                cycle = visit(target)
                if cycle:
                    return cycle
        on_path.discard(path.pop())
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_deferred_and_relative_imports(tmp_path):
    package = tmp_path / PACKAGE
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bert_mlm.core.high import Thing\n"
    )
    (package / "core" / "high.py").write_text("def f():\n    from . import low\n")
    graph = import_graph(package)
    assert graph[f"{PACKAGE}.core.low"] == {f"{PACKAGE}.core.high"}
    assert graph[f"{PACKAGE}.core.high"] == {f"{PACKAGE}.core.low"}
    assert find_cycle(graph) is not None


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and all(module.startswith(PACKAGE) for module in graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The package's ranks, lowest first: a module may import its own rank and the ranks below it, never
# one above (docs/architecture.md, "Packages"). A name is ranked by its longest listed prefix; the
# root package (``bert_mlm``: its version and the CPU wait setting) is rank 0.
RANKS = (
    ("bert_mlm", "bert_mlm.errors", "bert_mlm.cpus"),
    ("bert_mlm.config",),
    ("bert_mlm.core", "bert_mlm.core.common"),
    ("bert_mlm.core.data",),
    ("bert_mlm.core.tokens",),
    ("bert_mlm.core.model",),
    ("bert_mlm.core.evaluate",),
    ("bert_mlm.core.train",),
    ("bert_mlm.core.finetune",),
    ("bert_mlm.core.study",),
    ("bert_mlm.core.record",),
    ("bert_mlm.datasets",),
    ("bert_mlm.pipelines",),
    # The application around Kedro: hooks, tracking, commands, settings.
    ("bert_mlm.hooks", "bert_mlm.kedro_checks", "bert_mlm.run_lock", "bert_mlm.logs",
     "bert_mlm.cli", "bert_mlm.fill_mask", "bert_mlm.pipeline_registry", "bert_mlm.settings", "bert_mlm.forkserver",
     "bert_mlm.scratch",
     "bert_mlm.__main__"),
)


def rank_of(module: str) -> int:
    """The rank of ``module``: that of the longest prefix :data:`RANKS` lists (a KeyError for an
    unranked module, so that a new top-level module is placed on purpose)."""
    best = None
    for rank, prefixes in enumerate(RANKS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (rank, prefix)
    if best is None:
        raise KeyError(f"{module} has no rank: add it to RANKS in tests/test_import_graph.py")
    return best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} (rank {rank_of(module)}) imports {target} (rank {rank_of(target)})"
                  for module, targets in graph.items() for target in targets if rank_of(target) > rank_of(module))


def test_the_rank_check_names_an_upward_import():
    graph = {"bert_mlm.core.tokens.words": {"bert_mlm.core.model.masking", "bert_mlm.core.data.corpus"}}
    assert upward_imports(graph) == [
        "bert_mlm.core.tokens.words (rank 4) imports bert_mlm.core.model.masking (rank 5)"]
    assert rank_of("bert_mlm.core.data.sources.listing") == rank_of("bert_mlm.core.data")


def test_every_module_imports_only_its_own_rank_and_below():
    graph = import_graph()
    assert upward_imports(graph) == []


def test_the_configuration_and_the_core_import_no_kedro():
    """The configuration and the core are usable without Kedro: nothing in them imports it."""
    for module, path in module_names().items():
        if rank_of(module) <= rank_of("bert_mlm.core.record"):
            source = path.read_text(encoding="utf-8")
            assert not re.search(r"^\s*(from|import) kedro\b", source, re.MULTILINE), module


def test_the_data_stages_workers_do_not_import_torch():
    """A dask or process-pool worker of the data stages imports the token store and the encoders:
    importing torch there (~3 s through transformers) would cost every worker process its start."""
    import subprocess
    import sys

    code = ("import sys, bert_mlm.core.tokens.token_store, bert_mlm.core.tokens.words, bert_mlm.core.data.engine, "
            "bert_mlm.core.tokens.tokenization, bert_mlm.core.data.ingestion; "
            "print(sorted(name for name in ('torch', 'transformers') if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
