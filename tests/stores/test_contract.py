"""The public store contracts, run against every bundled backend."""

from __future__ import annotations

import pytest

from lovia.checkpointer import RunHead
from lovia.stores import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
from lovia.testing.contracts import CheckpointerContract, SessionContract
from lovia.transcript import InputEntry

SESSION_BACKENDS = ["memory", "sqlite", "sqlite-wal", "sqlite-shared-file"]
CHECKPOINT_BACKENDS = ["memory", "sqlite", "sqlite-wal", "sqlite-shared-file"]


class TestSessionContract(SessionContract):
    @pytest.fixture(params=SESSION_BACKENDS)
    async def session(self, request, tmp_path):
        if request.param == "memory":
            yield InMemorySession()
            return
        path = tmp_path / "store.db"
        neighbour = None
        if request.param == "sqlite-shared-file":
            # A checkpointer lives in the same file and has written to it first.
            neighbour = SQLiteCheckpointer(path, wal=True)
            await neighbour.append("neighbour-run", [InputEntry(role="user", content="hi")], RunHead(agent_name="a"))
        store = SQLiteSession(path, wal=request.param != "sqlite")
        yield store
        await store.close()
        if neighbour is not None:
            snap = await neighbour.load("neighbour-run")
            assert snap is not None and len(snap.entries) == 1
            await neighbour.close()


class TestCheckpointerContract(CheckpointerContract):
    @pytest.fixture(params=CHECKPOINT_BACKENDS)
    async def checkpointer(self, request, tmp_path):
        if request.param == "memory":
            yield InMemoryCheckpointer()
            return
        path = tmp_path / "store.db"
        neighbour = None
        if request.param == "sqlite-shared-file":
            neighbour = SQLiteSession(path, wal=True)
            await neighbour.append("neighbour", [InputEntry(role="user", content="hi")], run_id="r")
        store = SQLiteCheckpointer(path, wal=request.param != "sqlite")
        yield store
        await store.close()
        if neighbour is not None:
            assert len(await neighbour.load("neighbour")) == 1
            await neighbour.close()
