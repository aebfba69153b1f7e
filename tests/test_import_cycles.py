"""Imports go one way. No package imports one that imports it back (every package of
libs/, services/ and examples/, by what any of its modules imports); within a package,
no module imports one that imports it back, at the top of the file or inside a
function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "libs" / "cronwave_core"
#: Where packages live: a folder of packages each (libs/<package>/,
#: services/<service>/<package>/, examples/<example>/<package>/).
PACKAGE_ROOTS = [
    ROOT / "libs",
    *sorted(p for p in (ROOT / "services").iterdir() if p.is_dir()),
    *sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir()),
]
#: Generated code (tools/gen_protos.py), checked by tests/test_generated_code.py.
GENERATED = {"cronwave_proto"}
#: Packages whose modules still import each other in a circle (the cycle test names
#: each one); one that no longer does fails ``test_a_package_in_a_circle_is_still_one``
#: until it leaves this list.
MODULE_CYCLES_LEFT = {"console", "cronwave", "cronwave_waterfall", "worker"}


def _packages() -> dict[str, dict[str, Path]]:
    """Every package's modules, by package and module name."""
    found: dict[str, dict[str, Path]] = {}
    for root in PACKAGE_ROOTS:
        for package in sorted(root.iterdir()):
            if (package / "__init__.py").exists() and package.name not in GENERATED:
                found[package.name] = {
                    _dotted(path, root): path for path in sorted(package.rglob("*.py"))
                }
    return found


def _dotted(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_name(path: Path) -> str:
    return _dotted(path, CORE.parent)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The cronwave_core modules ``path`` imports anywhere in it, with the packages an
    import runs on its way (importing ``a.b.c`` runs ``a`` and ``a.b`` first)."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
            named.add(node.module)
        elif isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
    found: set[str] = set()
    for name in named:
        parts = name.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found & modules


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state and (found := visit(imported)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_cronwave_core_has_no_import_cycle() -> None:
    # Given every module of cronwave_core and the modules of it each one imports
    paths = {_module_name(p): p for p in CORE.rglob("*.py")}
    modules = set(paths)
    graph = {name: _imports(path, modules) - {name} for name, path in paths.items()}
    assert "cronwave_core.telemetry.fanout" in graph["cronwave_core.telemetry.tracing"]

    # Then following the imports never leads back to where it started
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}


def test_no_package_imports_one_that_imports_it_back() -> None:
    # Given every package and the other packages its modules import
    packages = _packages()
    graph = {
        package: {
            name.split(".")[0]
            for path in modules.values()
            for name in _imports(path, {m for p in packages.values() for m in p})
        }
        - {package}
        for package, modules in packages.items()
    }
    assert {"cronwave", "cronwave_bench", "cronwave_server", "worker", "cronwave_billing"} <= set(
        graph
    )
    assert "cronwave" in graph["cronwave_bench"]

    # Then following them never leads back to where it started: the SDK reaches no
    # package of the server, the bench none of the commands that run it
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    assert graph["cronwave"] == {"cronwave_core"}


@pytest.mark.parametrize(
    "package", sorted(set(_packages()) - MODULE_CYCLES_LEFT), ids=lambda name: name
)
def test_a_package_has_no_import_cycle(package: str) -> None:
    graph = _module_graph(_packages()[package])

    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


@pytest.mark.parametrize("package", sorted(MODULE_CYCLES_LEFT), ids=lambda name: name)
def test_a_package_in_a_circle_is_still_one(package: str) -> None:
    assert _cycle(_module_graph(_packages()[package])) is not None, (
        f"{package} has no import cycle any more: take it out of MODULE_CYCLES_LEFT"
    )


def test_a_cycle_is_seen() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
