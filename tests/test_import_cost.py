"""What ``import lovia`` and ``lovia --help`` load: only what a run needs, the rest on first use.

Each check runs in a fresh interpreter and reads ``sys.modules`` (timings do not belong in tests;
``bench/startup.py`` measures them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Loaded on first use only: the web stack, optional extras, vendor providers and their HTTP
# client, the stores, the plugins, the workspace, the built-in tools, pydantic itself.
NOT_AT_IMPORT = [
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "httpx",
    "httpcore",
    "sqlite3",
    "pydantic",
    "importlib.metadata",
    "opentelemetry",
    "mcp",
    "psycopg",
    "lovia.web",
    "lovia.eval",
    "lovia.cli",
    "lovia.stores.sqlite.session",
    "lovia.stores.sqlite.checkpointer",
    "lovia.stores.memory",
    "lovia.stores.postgres",
    "lovia.plugins.memory",
    "lovia.plugins.skills",
    "lovia.plugins.subagents",
    "lovia.plugins.todo",
    "lovia.plugins.mcp",
    "lovia.providers.anthropic",
    "lovia.providers.openai_chat",
    "lovia.providers.openai_responses",
    "lovia.providers.gemini",
    "lovia.providers.scripted",
    "lovia.tools.page",
    "lovia.tools.search",
    "lovia.tools.human",
    "lovia.workspace.local",
    "lovia.workspace.types",
    "lovia._otel",
]


def loaded_after(code: str) -> set[str]:
    """The module names present in a fresh interpreter after running ``code``."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy(found: set[str], names: list[str]) -> list[str]:
    return [n for n in names if n in found]


def test_import_lovia_leaves_what_a_run_does_not_need_unloaded() -> None:
    found = loaded_after("import lovia")
    assert heavy(found, NOT_AT_IMPORT) == []
    assert "lovia.runner" in found and "lovia.agent" in found  # the run's core is there


def test_the_probe_sees_a_module_once_it_is_used() -> None:
    """The check above can fail: touching a lazy name loads what it names."""
    found = loaded_after("import lovia\nlovia.SQLiteSession\nlovia.AnthropicProvider\nlovia.Memory")
    assert {"sqlite3", "httpx", "lovia.stores.sqlite.session", "lovia.plugins.memory"} <= found


def test_a_run_without_tools_or_stores_stays_lean() -> None:
    found = loaded_after(
        "import asyncio\n"
        "from lovia import Agent, Runner\n"
        "from lovia.providers.scripted import ScriptedProvider, text\n"
        "agent = Agent(name='a', instructions='x', model=ScriptedProvider([text('hi')]))\n"
        "assert asyncio.run(Runner.run(agent, 'hello')).output == 'hi'\n"
    )
    still_unloaded = [n for n in NOT_AT_IMPORT if n != "lovia.providers.scripted"]
    assert heavy(found, still_unloaded) == []


def test_cli_help_leaves_the_web_app_and_the_stores_unloaded() -> None:
    found = loaded_after(
        "import sys, contextlib, io\n"
        "from lovia.cli import build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    build_parser().parse_args(['--help'])\n"
    )
    names = [
        "fastapi",
        "starlette",
        "uvicorn",
        "jinja2",
        "httpx",
        "pydantic",
        "lovia.web.app",
        "lovia.web.store",
        "lovia.web.supervisor",
        "lovia.workspace.local",
        "lovia.stores.sqlite.session",
        "lovia.eval.judge",
    ]
    assert heavy(found, names) == []


def test_every_lazy_name_resolves_and_is_listed() -> None:
    """Each package serving names lazily lists them in ``dir()`` and hands back the real objects."""
    code = (
        "import importlib, json\n"
        "out = {}\n"
        "for pkg in ['lovia', 'lovia.tools', 'lovia.plugins', 'lovia.providers', 'lovia.context',\n"
        "            'lovia.stores', 'lovia.stores.sqlite', 'lovia.workspace', 'lovia.eval', 'lovia.web']:\n"
        "    m = importlib.import_module(pkg)\n"
        "    lazy = getattr(m, '_LAZY')\n"
        "    missing = [n for n in lazy if n not in dir(m)]\n"
        "    wrong = [n for n in lazy if getattr(m, n) is not getattr(importlib.import_module(lazy[n], pkg), n)]\n"
        "    out[pkg] = [missing, wrong]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert {pkg: v for pkg, v in report.items() if v != [[], []]} == {}


def test_an_unknown_name_is_an_attribute_error() -> None:
    import lovia

    with pytest.raises(AttributeError, match="NoSuchThing"):
        lovia.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError):
        from lovia.tools import no_such_tool  # type: ignore[attr-defined]  # noqa: F401
