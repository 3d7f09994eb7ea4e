"""The package's import graph has no cycle: a cycle makes the import order decide which names exist
(an ``ImportError`` on a partly initialised module) and hides which module is the lower layer.

The graph is read from the source with ``ast``, not by importing: every ``import`` and
``from ... import`` of a ``bert_mlm`` module counts, inside functions and under ``TYPE_CHECKING``
too, since a deferred import only postpones the cycle.
"""

from __future__ import annotations

import ast
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
