from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from lovia.web import create_app

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
