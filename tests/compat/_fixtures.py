"""Where the files lovia 0.9.119 wrote live, and copies of them a test may migrate."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest


def _locate() -> Path:
    # CI clones the repository next to a copy of ``shared/``: <parent>/<repo>/tests/compat/this file.
    # A git worktree sits one folder deeper (<parent>/wt/<name>/...), so further ancestors are tried too.
    repo = Path(__file__).resolve().parents[2]
    candidates = [folder / "shared" / "fixtures" / "lovia-0.9.119" for folder in repo.parents]
    return next((c for c in candidates if (c / "expected.json").is_file()), candidates[0])


FIXTURES = _locate()

needs_fixtures = pytest.mark.skipif(
    not (FIXTURES / "expected.json").is_file(),
    reason=f"the files lovia 0.9.119 wrote are not at {FIXTURES} (a copy of shared/ next to the repository)",
)


def expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text())
    return data


def copy_fixture(name: str, folder: Path) -> Path:
    """A writable copy of one fixture file (opening a store migrates it); ``name`` may be ``memory/x.db``."""
    target = folder / Path(name).name
    shutil.copyfile(FIXTURES / name, target)
    target.chmod(target.stat().st_mode | stat.S_IWUSR)
    return target


def drop_none(value: Any) -> Any:
    """``value`` without the dict keys whose value is ``None`` (0.9.119 omitted them when it wrote expected.json)."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value
