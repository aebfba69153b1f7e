"""cronwave_core imports itself in one direction only: no module imports one that
imports it back, at the top of the file or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "libs" / "cronwave_core"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def test_a_cycle_is_seen() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
