"""The public surface: sorted, importable, unchanged unless on purpose, and documented."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import lovia

ROOT = Path(__file__).resolve().parents[1]
LISTING = ROOT / "tests" / "fixtures" / "public_api.txt"
MODULES = [
    "lovia",
    "lovia.events",
    "lovia.exceptions",
    "lovia.transcript",
    "lovia.messages",
    "lovia.testing",
    "lovia.tools",
    "lovia.context",
    "lovia.providers",
    "lovia.stores",
    "lovia.session",
    "lovia.checkpointer",
    "lovia.hooks",
    "lovia.tracing",
    "lovia.plugins",
    "lovia.reliability",
    "lovia.approvals",
    "lovia.output",
    "lovia.handoff",
    "lovia.parts",
    "lovia.steering",
    "lovia.schema",
    "lovia.http_config",
    "lovia.types",
    "lovia.plugins.base",
    "lovia.context.policy",
    "lovia.guardrails",
    "lovia.workspace",
    "lovia.integrations.celery",
]


def current_listing() -> str:
    lines = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            kind = (
                "class"
                if inspect.isclass(obj)
                else "module"
                if inspect.ismodule(obj)
                else "function"
                if callable(obj)
                else "value"
            )
            lines.append(f"{name}.{attr} {kind}")
    return "\n".join(lines) + "\n"


def isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then everything else."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_importable():
    for name in MODULES:
        module = importlib.import_module(name)
        assert list(module.__all__) == sorted(module.__all__, key=isort_key), f"{name}.__all__ is not sorted"
        for attr in module.__all__:
            assert hasattr(module, attr), f"{name}.{attr} is listed but missing"


def test_seed_imports():
    from lovia import CheckpointOptions, Runner, SQLiteCheckpointer, SQLiteSession  # noqa: F401
    from lovia.transcript import drop_dangling_tool_calls  # noqa: F401


def test_public_api_listing_changes_only_on_purpose():
    """If this fails after a deliberate API change, regenerate tests/fixtures/public_api.txt."""
    assert LISTING.read_text() == current_listing()


def test_every_top_level_name_is_documented():
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md")) + (ROOT / "README.md").read_text()
    missing = [n for n in lovia.__all__ if not re.search(rf"\b{re.escape(n)}\b", docs)]
    assert not missing, f"public names missing from docs/: {missing}"


def test_public_names_have_docstrings():
    undocumented = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and not inspect.getdoc(obj):
                undocumented.append(f"{name}.{attr}")
    assert not undocumented, undocumented
