from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from lovia.web import create_app

from .browser_kit import launch_chromium
from .helpers import Gate, ThreadServer, scripted_agent


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "web.db")


@pytest.fixture
def server(db: str, gate: Gate) -> Iterator[ThreadServer]:
    app = create_app(scripted_agent(gate), db_path=db)
    with ThreadServer(app) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium per test module (``page`` fixtures open a context on it)."""
    yield from launch_chromium()
