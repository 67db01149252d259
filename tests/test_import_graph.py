"""The package's import graph has no cycle, type-only and function-level imports included.

The graph is read from the source with ``ast`` (nothing is imported): an edge ``a -> b`` is any
``import``/``from ... import`` in module ``a`` that names module ``b`` of the package, wherever it
sits (module level, ``if TYPE_CHECKING:``, inside a function). ``from pkg import name`` is an edge
to ``pkg.name`` when that is a module, else to ``pkg``. Importing a submodule also runs its
package's ``__init__``, but that is not counted as an edge of the importer: package ``__init__``
files are re-export lists and are checked as modules of their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lovia"

KNOWN_CYCLES: list[tuple[str, ...]] = [
    (
        "lovia.agent",
        "lovia.context",
        "lovia.context.base",
        "lovia.context.compaction",
        "lovia.context.policy",
        "lovia.events",
        "lovia.guardrails",
        "lovia.handle",
        "lovia.handoff",
        "lovia.hooks",
        "lovia.plugins",
        "lovia.plugins.base",
        "lovia.result",
        "lovia.run.activate",
        "lovia.run.finish",
        "lovia.run.loop",
        "lovia.run.model_call",
        "lovia.run.options",
        "lovia.run.persist",
        "lovia.run.setup",
        "lovia.run.state",
        "lovia.run.tool_phase",
        "lovia.run.turn",
        "lovia.run.view",
        "lovia.run_context",
        "lovia.runner",
        "lovia.tools",
        "lovia.tools._run",
        "lovia.tools._schema",
        "lovia.tools._tool",
        "lovia.tools.recall",
    ),
    (
        "lovia.cli",
        "lovia.eval.cli",
    ),
    (
        "lovia.stores.postgres._db",
        "lovia.stores.postgres._schema",
    ),
    (
        "lovia.web.app",
        "lovia.web.routes_chat",
        "lovia.web.routes_info",
        "lovia.web.routes_sessions",
    ),
]
"""Cycles not broken yet, each the sorted modules of one strongly connected component.

A cycle found must lie inside one of these; one that grows, or a new one, fails the test.
"""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "static" not in p.parts}


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules that ``name`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def path_in(graph: dict[str, set[str]], component: tuple[str, ...]) -> list[str]:
    """One concrete cycle through the component, for the failure message."""
    members = set(component)
    start = component[0]
    trail = [start]
    seen = {start}
    while True:
        nxt = sorted(w for w in graph[trail[-1]] if w in members)
        back = [w for w in nxt if w == start]
        if back and len(trail) > 1:
            return [*trail, start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            return [*trail, nxt[0]] if nxt else trail
        trail.append(fresh[0])
        seen.add(fresh[0])


def test_the_graph_is_read_from_real_edges():
    graph = import_graph()
    assert "lovia.run.loop" in graph and "lovia.run.state" in graph["lovia.run.loop"]
    assert "lovia.agent" in graph["lovia.run.state"]


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [("a", "b", "c")]
    assert path_in(graph, ("a", "b", "c")) == ["a", "b", "c", "a"]


def _known(cycle: tuple[str, ...]) -> bool:
    return any(set(cycle) <= set(known) for known in KNOWN_CYCLES)


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    new = [c for c in found if not _known(c)]
    message = "\n".join(" -> ".join(path_in(graph, c)) + f"   ({len(c)} modules)" for c in new)
    assert not new, f"import cycles (type-only and function-level imports count):\n{message}"


@pytest.mark.parametrize("known", KNOWN_CYCLES)
def test_known_cycles_still_exist(known: tuple[str, ...]):
    """Shrink or drop a KNOWN_CYCLES entry once (part of) it is broken."""
    assert any(set(c) == set(known) for c in cycles(import_graph())), "this cycle shrank or is gone: update it"
