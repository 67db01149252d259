"""The package's import graph: no cycle, neither at run time nor counting type-only imports.

The graph is read from the source with ``ast`` (nothing is imported): an edge ``a -> b`` is an
``import``/``from ... import`` in module ``a`` naming module ``b`` of the package, at module level
or inside a function. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
else to ``pkg``. A package's ``__init__`` counts as the module ``pkg`` (its re-exports are edges).

* Run time (everything but ``if TYPE_CHECKING:`` blocks): no cycle.
* Type level (those blocks too): no cycle either; nothing is allow-listed.

The run's own types (``RunContext``, ``RunResult``, ``Handoff``, the events) refer to the agent
through the ``AgentLike`` protocol (``lovia/_agent_protocol.py``), so they never import
``lovia.agent``; the web routes read the app state from ``lovia/web/state.py``, not the app.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lovia"


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


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _import_nodes(tree: ast.AST, *, types: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not types:
                todo.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            todo.append(child)
    return found


def imports_of(name: str, path: Path, known: set[str], *, types: bool = True) -> set[str]:
    """Package modules that ``name`` imports anywhere in its source (``types``: in TYPE_CHECKING too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _import_nodes(tree, types=types):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
            continue
        target = _resolve(name, is_package, node.level, node.module)
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in known:
                found.add(sub)
            elif target in known:
                found.add(target)
    found.discard(name)
    return found


def import_graph(*, types: bool = True) -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known, types=types) for name, path in mods.items()}


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


def _report(graph: dict[str, set[str]], found: list[tuple[str, ...]]) -> str:
    return "\n".join(" -> ".join(path_in(graph, c)) + f"   ({len(c)} modules)" for c in found)


def test_the_graph_is_read_from_real_edges():
    graph = import_graph()
    assert "lovia.run.state" in graph["lovia.run.loop"] and "lovia.agent" in graph["lovia.run.state"]
    assert "lovia.tracing" in graph["lovia.run_context"]  # under TYPE_CHECKING
    assert "lovia.tracing" not in import_graph(types=False)["lovia.run_context"]
    assert "lovia.web.check" in graph["lovia.web.command"]  # inside a function


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [("a", "b", "c")]
    assert path_in(graph, ("a", "b", "c")) == ["a", "b", "c", "a"]


def test_no_import_cycle_at_run_time():
    graph = import_graph(types=False)
    found = cycles(graph)
    assert not found, f"import cycles (function-level imports count):\n{_report(graph, found)}"


def test_no_import_cycle_counting_type_only_imports():
    graph = import_graph()
    found = cycles(graph)
    assert not found, f"import cycles (TYPE_CHECKING imports count):\n{_report(graph, found)}"


def test_the_run_types_do_not_import_the_agent():
    graph = import_graph()
    for name in ("lovia.run_context", "lovia.result", "lovia.events", "lovia.handoff", "lovia._agent_protocol"):
        assert "lovia.agent" not in graph[name], name


def test_web_imports_neither_testing_nor_the_command_line():
    graph = import_graph()
    web = {name: deps for name, deps in graph.items() if name.startswith("lovia.web")}
    bad = {name: sorted(d for d in deps if d.startswith(("lovia.testing", "lovia.cli"))) for name, deps in web.items()}
    assert not {name: deps for name, deps in bad.items() if deps}


def test_the_package_and_its_moved_modules_import_in_a_fresh_interpreter():
    # Every `import lovia.x` runs lovia/__init__ first, so one interpreter checks that order.
    code = "import lovia, lovia.tools.recall, lovia.context.recall, lovia.web, lovia.web.command, lovia.testing"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
