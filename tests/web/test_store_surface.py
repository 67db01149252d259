"""``ChatStore``'s chat surface on SQLite and PostgreSQL: upsert, titles, pins, search, the run in
flight and its client context, UI data, forks, subagent task trees, delete with schedules; and a
resumed run getting its stored client context back after a server restart."""

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

from lovia.exceptions import UserError
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web import ChatMeta, ChatStore, create_app
from lovia.web.run_deps import RunTrigger
from lovia.web.schedule_store import ScheduleRow

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
        from lovia.web.store_pg import PostgresChatStore

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


def test_upsert_titles_pins_list_and_search(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        await store.upsert("chat_a", agent="bot", title="Quarterly report")
        first = await store.get("chat_a")
        assert first is not None and (first.title, first.agent) == ("Quarterly report", "bot")
        time.sleep(0.01)
        await store.upsert("chat_a")  # nothing given: the title and agent stay, updated_at moves
        again = await store.get("chat_a")
        assert again is not None and (again.title, again.agent) == ("Quarterly report", "bot")
        assert again.created_at == first.created_at and again.updated_at > first.updated_at
        await store.upsert("chat_a", agent="other", title="Renamed")
        assert (await store.get("chat_a")).agent == "other"  # type: ignore[union-attr]
        time.sleep(0.01)
        await store.upsert("chat_b", title="Grocery list")
        await store.set_title("chat_a", "Annual REPORT")
        assert [m.id for m in await store.list()] == ["chat_b", "chat_a"]  # newest first
        await store.set_pinned("chat_a", True)
        listed = await store.list()
        assert [m.id for m in listed] == ["chat_a", "chat_b"] and listed[0].pinned
        assert listed[0].title == "Annual REPORT"
        assert [m.id for m in await store.list(limit=1, offset=1)] == ["chat_b"]
        assert [m.id for m in await store.search("report")] == ["chat_a"]  # case-insensitive, by title
        assert [m.id for m in await store.search("CHAT_B")] == ["chat_b"]  # or by id
        assert [m.id for m in await store.list(query="grocery")] == ["chat_b"]
        await store.set_pinned("chat_a", False)
        assert [m.id for m in await store.list()] == ["chat_b", "chat_a"]

    run(make_store, body)


def test_set_title_if_unchanged_keeps_a_rename_made_meanwhile(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        await store.upsert("chat_t", title="make the report")
        await store.set_title("chat_t", "My name for it")  # the user renames while a title is computed
        await store.set_title_if_unchanged("chat_t", "Report request", expected="make the report")
        assert (await store.get("chat_t")).title == "My name for it"  # type: ignore[union-attr]
        await store.set_title_if_unchanged("chat_t", "Report request", expected="My name for it")
        assert (await store.get("chat_t")).title == "Report request"  # type: ignore[union-attr]
        await store.upsert("chat_u")
        await store.set_title_if_unchanged("chat_u", "Named", expected=None)  # None: still untitled
        assert (await store.get("chat_u")).title == "Named"  # type: ignore[union-attr]

    run(make_store, body)


def test_the_run_in_flight_and_its_client_context(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        await store.upsert("chat_r")
        assert await store.get_active_run_id("chat_r") is None and await store.get_active_context("chat_r") is None
        await store.set_active_run_id("chat_r", "run_1", context={"tab": "reports", "ids": [1, 2]})
        assert await store.get_active_run_id("chat_r") == "run_1"
        assert (await store.get("chat_r")).active_run_id == "run_1"  # type: ignore[union-attr]
        assert await store.get_active_context("chat_r") == {"tab": "reports", "ids": [1, 2]}
        await store.clear_active_run_id("chat_r", expected="run_other")  # another run's end: kept
        assert await store.get_active_run_id("chat_r") == "run_1"
        await store.clear_active_run_id("chat_r", expected="run_1")
        assert await store.get_active_run_id("chat_r") is None and await store.get_active_context("chat_r") is None
        await store.set_active_run_id("chat_r", "run_2")
        assert await store.get_active_context("chat_r") is None  # no context given
        await store.clear_active_run_id("chat_r")
        assert await store.get_active_run_id("chat_r") is None

    run(make_store, body)


def test_put_ui_data_needs_the_chat(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        assert await store.put_ui_data("chat_missing", b"{}") is None
        assert await store.get_ui_data("chat_missing", "anything") is None
        await store.upsert("chat_ui")
        ref = await store.put_ui_data("chat_ui", b'{"rows": [1]}')
        assert ref is not None and await store.get_ui_data("chat_ui", ref) == b'{"rows": [1]}'

    run(make_store, body)


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


def test_delete_takes_the_chats_schedules_unless_told_not_to(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        schedules = store.schedule_store
        assert schedules is not None
        for sid in ("chat_1", "chat_2", "chat_3"):
            await store.upsert(sid)
            await schedules.add(_schedule(sid, 1))
        await schedules.add(_schedule("chat_1", 2))
        await store.delete("chat_1")
        assert await store.get("chat_1") is None and list(await schedules.list(session_id="chat_1")) == []
        assert [r.id for r in await schedules.list(session_id="chat_2")] == ["sch_chat_2_1"]
        await store.delete("chat_2", schedules=False)
        assert await store.get("chat_2") is None
        assert [r.id for r in await schedules.list(session_id="chat_2")] == ["sch_chat_2_1"]  # kept
        await store.upsert("chat_4")
        await store.delete_all()
        assert await store.list() == [] and list(await schedules.list(session_id="chat_3")) == []

    run(make_store, body)


async def _two_turn_chat(store: ChatStore, sid: str) -> tuple[str, str]:
    await store.upsert(sid, title="Source", agent="bot")
    await store.session.append(
        sid,
        [InputEntry(role="user", content="q1"), AssistantTextEntry("a1")],
        run_id="run_one",
    )
    await store.session.append(
        sid,
        [InputEntry(role="user", content="q2"), AssistantTextEntry("a2")],
        run_id="run_two",
    )
    return "run_one:0", "run_two:0"


def test_fork_copies_history_up_to_a_ref(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        first, second = await _two_turn_chat(store, "chat_src")
        if not store.supports_origins:  # this database records no origins: refused, nothing left behind
            with pytest.raises(UserError):
                await store.fork("chat_src", ref=second)
            assert await store.ids() == ["chat_src"]
            return
        new_id = await store.fork("chat_src", ref=second)
        assert new_id is not None and new_id != "chat_src"
        meta = await store.get(new_id)
        assert meta is not None and (meta.origin_kind, meta.origin_session_id, meta.origin_ref) == (
            "fork",
            "chat_src",
            second,
        )
        assert meta.title == "Source (branch)" and meta.agent == "bot" and meta.parent_id is None
        copied = await store.session.load(new_id)
        assert [getattr(e, "content", getattr(e, "text", None)) for e in copied] == ["q1", "a1"]
        whole = await store.fork("chat_src")
        assert whole is not None and len(await store.session.load(whole)) == 4
        assert (await store.get(whole)).origin_ref is None  # type: ignore[union-attr]
        listed = {m.id: m for m in await store.list()}
        assert listed[new_id].origin_ref == second  # the list carries the origin too
        assert await store.fork("chat_src", ref=first) is None  # nothing before the first message
        assert await store.fork("chat_src", ref="run_nope:0") is None
        assert await store.fork("chat_missing") is None
        assert len(await store.session.load("chat_src")) == 4  # the source is untouched

    run(make_store, body)


def test_children_and_a_task_tree_deeper_than_one(make_store: MakeStore) -> None:
    async def body(store: ChatStore) -> None:
        await store.upsert("chat_root", title="root")
        if not store.supports_origins:
            with pytest.raises(UserError):
                await store.upsert("chat_child", parent_id="chat_root")
            assert await store.list_children("chat_root") == []
            assert list(await store.task_tree("chat_root")) == ["chat_root"]
            return
        await store.upsert("chat_child", parent_id="chat_root")
        await store.upsert("chat_grandchild", parent_id="chat_child")
        await store.upsert("chat_second", parent_id="chat_root")
        await store.upsert("chat_spawned", spawned_from="chat_root")
        children = await store.list_children("chat_root")
        assert [c.id for c in children] == ["chat_child", "chat_second"]
        assert all(c.parent_id == "chat_root" and c.origin_kind is None for c in children)
        spawned = await store.get("chat_spawned")
        assert spawned is not None and (spawned.origin_kind, spawned.origin_session_id, spawned.parent_id) == (
            "spawn",
            "chat_root",
            None,
        )
        assert list(await store.task_tree("chat_root")) == ["chat_root", "chat_child", "chat_second", "chat_grandchild"]
        assert list(await store.task_tree("chat_child")) == ["chat_child", "chat_grandchild"]
        assert [c.id for c in await store.list_children("chat_grandchild")] == []

    run(make_store, body)


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
