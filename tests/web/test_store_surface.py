"""``ChatStore`` beyond the chat index contract (``tests/web/store/test_chat_index_contract.py``):
reading index rows, constructor defaults and WAL, a resumed run getting its stored client context
back after a server restart, background titles and deleting a task tree over HTTP."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.web import ChatMeta, ChatStore, create_app
from lovia.web.run_deps import RunTrigger
from lovia.web.store import ScheduleRow

from ..pg_support import DSN, drop_schema, new_schema, requires_pg
from .helpers import Gate, ThreadServer, scripted_agent, sse, wait_for

MakeStore = Callable[[], ChatStore]


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=requires_pg)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory of stores on one place (call it again for a "restarted" store on the same data)."""
    schema = new_schema("store") if request.param == "pg" else None

    def make() -> ChatStore:
        if schema is None:
            return ChatStore.sqlite(tmp_path / "chats.db")
        from lovia.web.store import PostgresChatStore

        return PostgresChatStore(DSN, schema=schema)

    yield make
    if schema is not None:
        drop_schema(schema)


def run(make: MakeStore, body: Callable[[ChatStore], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        store = make()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(go())


def test_chat_meta_from_row_reads_the_origin_columns() -> None:
    fork = ChatMeta.from_row(("c1", "t", "bot", 1.0, 2.0, "run_1", 1, "fork", "c0", "run_a:1"))
    assert (fork.pinned, fork.active_run_id, fork.origin_kind, fork.origin_session_id, fork.origin_ref) == (
        True,
        "run_1",
        "fork",
        "c0",
        "run_a:1",
    )
    assert fork.parent_id is None
    task = ChatMeta.from_row(("c2", "t", None, 1.0, 2.0, None, 0, "subagent", "c0", None))
    assert (task.parent_id, task.origin_kind, task.origin_session_id) == ("c0", None, None)
    plain = ChatMeta.from_row(("c3", None, None, 1.0, 2.0, None, 0))  # an index row without origin columns
    assert plain.title is None and plain.parent_id is None and plain.origin_kind is None
    assert plain.to_dict()["origin_ref"] is None and set(fork.to_dict()) >= {"parent_id", "origin_kind"}
    damaged = ChatMeta.from_row(("c4", "t", None, "not a time", 2.0, None, 0))
    assert damaged.damaged and "c4" in damaged.damaged


def _schedule(sid: str, n: int) -> ScheduleRow:
    now = time.time()
    return ScheduleRow(
        id=f"sch_{sid}_{n}",
        agent=None,
        input="ping",
        session_id=sid,
        trigger_kind="every",
        trigger_expr="1h",
        next_fire=now + 3600,
        active=True,
        last_session_id=None,
        created_at=now,
        updated_at=now,
    )


def test_constructor_defaults_and_wal(tmp_path: Path) -> None:
    async def body() -> None:
        path = tmp_path / "custom.db"
        store = ChatStore(SQLiteSession(path), meta_path=path)
        assert isinstance(store.checkpointer, SQLiteCheckpointer)  # default: checkpoints in the index file
        await store.upsert("chat_x", title="x")
        await store.close()
        reopened = ChatStore(SQLiteSession(path), meta_path=path)
        assert (await reopened.get("chat_x")).title == "x"  # type: ignore[union-attr]
        await reopened.close()
        plain = ChatStore.sqlite(tmp_path / "nowal.db", wal=False)
        await plain.upsert("chat_y")
        await plain.close()
        memory = ChatStore.in_memory()
        await memory.upsert("chat_m")
        assert [m.id for m in await memory.list()] == ["chat_m"]
        assert await memory.list_schedules() == []  # an in-memory schedule store of its own
        await memory.close()

    asyncio.run(body())
    with sqlite3.connect(tmp_path / "custom.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"  # the wal=False default
    with sqlite3.connect(tmp_path / "nowal.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
    with sqlite3.connect(tmp_path / "wal.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    asyncio.run(_open_close(tmp_path / "wal.db"))
    with sqlite3.connect(tmp_path / "wal.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def _open_close(path: Path) -> None:
    store = ChatStore.sqlite(path)
    await store.close()


@pytest.mark.slow
def test_a_resumed_run_gets_its_stored_client_context_after_a_restart(make_store: MakeStore) -> None:
    """A run interrupted by a shutdown resumes in the next server with the page's context it started with."""
    triggers: list[RunTrigger] = []

    def record(trigger: RunTrigger) -> dict[str, Any]:
        triggers.append(trigger)
        return {"tab": trigger.client_context.get("tab")}

    gate = Gate()
    context = {"tab": "reports", "filters": {"year": 2026}}
    with ThreadServer(create_app(scripted_agent(gate), store=make_store(), run_deps=record)) as first:
        s = sse(first.url, "/api/chat/stream", {"message": "slow run", "context": context}, until="tool_call")
        sid = s.of("session")[0]["session_id"]
        wait_for(lambda: gate.runs.get("slow", 0) == 1)  # the run is inside its slow tool
        assert triggers[-1].client_context == context and not triggers[-1].resumed
    # the first server shut down mid-run: the run waits in its checkpoint, its context beside it

    async def stored(store: ChatStore) -> Any:
        return await store.get_active_run_id(sid), await store.get_active_context(sid)

    run_id, kept = run(make_store, stored)
    assert run_id is not None and kept == context

    triggers.clear()
    gate.release.set()  # the resumed slow tool finishes at once
    with ThreadServer(create_app(scripted_agent(gate), store=make_store(), run_deps=record)) as second:
        # On PostgreSQL the new server may take the orphaned run over and finish it before the
        # reconnect arrives: then there is nothing left to reconnect to (404 run_not_found).
        r = httpx.post(f"{second.url}/api/chat/reconnect?session_id={sid}", timeout=20)
        assert r.status_code == 200 or r.json()["detail"]["code"] == "run_not_found", r.text

        def finished() -> bool:
            meta = httpx.get(f"{second.url}/api/sessions/{sid}").json()
            return meta["active_run_id"] is None and not meta["live"]

        wait_for(finished, timeout=20)
    resumed = [t for t in triggers if t.resumed]
    assert resumed and all(t.client_context == context for t in resumed)
    assert run(make_store, stored) == (None, None)  # the finished run's context is gone with it


def test_a_background_title_never_replaces_a_rename_made_while_it_was_computed(tmp_path: Path) -> None:
    from lovia.testing import ScriptedProvider, text

    asked, proceed = threading.Event(), threading.Event()

    async def titler_script(_entries: Any, _tools: Any) -> Any:
        asked.set()
        while not proceed.is_set():
            await asyncio.sleep(0.02)
        return text("Auto Title")

    titler = ScriptedProvider(titler_script)
    app = create_app(scripted_agent(), db_path=str(tmp_path / "t.db"), title_model=titler)
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        renamed = http.post("/api/chat", json={"message": "hello there"}).json()["session_id"]
        wait_for(asked.is_set)  # the title model is working on it
        assert http.patch(f"/api/sessions/{renamed}", json={"title": "Mine"}).status_code == 200
        proceed.set()
        untouched = http.post("/api/chat", json={"message": "another chat"}).json()["session_id"]
        wait_for(lambda: http.get(f"/api/sessions/{untouched}").json()["title"] == "Auto Title", timeout=20)
        assert http.get(f"/api/sessions/{renamed}").json()["title"] == "Mine"


def test_deleting_a_chat_over_http_takes_its_task_tree_and_schedules(tmp_path: Path) -> None:
    db = tmp_path / "tree.db"

    async def seed(store: ChatStore) -> None:
        await store.upsert("chat_top", title="top")
        await store.upsert("chat_task", parent_id="chat_top")
        await store.upsert("chat_subtask", parent_id="chat_task")
        await store.upsert("chat_spawned", spawned_from="chat_top")  # owned by neither: it stays
        schedules = store.schedule_store
        assert schedules is not None
        for sid in ("chat_top", "chat_subtask", "chat_spawned"):
            await schedules.add(_schedule(sid, 1))

    async def left(store: ChatStore) -> tuple[list[str], list[str | None]]:
        schedules = store.schedule_store
        assert schedules is not None
        return sorted(await store.ids()), sorted(r.session_id for r in await schedules.list())  # type: ignore[type-var]

    run(lambda: ChatStore.sqlite(db), seed)
    with ThreadServer(create_app(scripted_agent(), db_path=str(db))) as srv:
        assert httpx.delete(f"{srv.url}/api/sessions/chat_top").json() == {"deleted": "chat_top"}
    assert run(lambda: ChatStore.sqlite(db), left) == (["chat_spawned"], ["chat_spawned"])
