"""ChatStore behaviours code written for lovia 0.9.119 relies on, on SQLite and on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lovia.transcript import InputEntry
from lovia.web import store_schedules
from lovia.web.store import ChatStore, RunRow
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

BACKENDS = ["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres])]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[ChatStore]:
    if request.param == "sqlite":
        chat_store = ChatStore.sqlite(tmp_path / "s.db")
        yield chat_store
        await chat_store.close()
        return
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    from lovia.web.store_pg import PostgresChatStore

    schema = new_schema("s119")
    pg = PostgresChatStore(DSN, schema=schema)
    try:
        yield pg
    finally:
        await pg.close()
        drop_schema(schema)


def _run(run_id: str, session_id: str, *, source: str = "user", started_at: float = 1000.0) -> RunRow:
    return RunRow(
        id=run_id,
        session_id=session_id,
        agent="a",
        source=source,
        status="running",
        error=None,
        started_at=started_at,
        finished_at=None,
        usage=None,
    )


async def test_titles_untitled_is_none_and_set_title_strips_and_cuts(store: ChatStore) -> None:
    meta = await store.create()
    assert meta.title is None and meta.to_dict()["title"] is None
    await store.set_title(meta.id, "  " + "t" * 200 + "  ")
    title = (await store.get(meta.id)).title  # type: ignore[union-attr]
    assert title == "t" * 120
    await store.set_title(meta.id, "  short  ")
    assert (await store.get(meta.id)).title == "short"  # type: ignore[union-attr]


async def test_list_leaves_out_task_chats_and_search_takes_wildcards_literally(store: ChatStore) -> None:
    top = await store.create(title="100% done")
    await store.upsert("task_1", parent_id=top.id, title="a task")
    await store.create(title="1000 done")
    await store.create(title="a_b")
    await store.create(title="axb")
    listed = [m.title for m in await store.list()]
    assert "a task" not in listed and len(listed) == 4
    assert [m.id for m in await store.list_children(top.id)] == ["task_1"]
    assert [m.title for m in await store.search("100%")] == ["100% done"]
    assert [m.title for m in await store.search("a_b")] == ["a_b"]


async def test_deleting_a_chat_deletes_its_tasks_at_any_depth(store: ChatStore) -> None:
    top = await store.create(title="top")
    await store.upsert("task_a", parent_id=top.id)
    await store.upsert("task_b", parent_id="task_a")
    spawned = await store.create(title="spawned")
    await store.set_origin(spawned.id, kind="spawn", origin_session_id=top.id, user_turn=None, title="top")
    for sid in (top.id, "task_a", "task_b"):
        await store.session.append(sid, [InputEntry(role="user", content=f"hi {sid}")], run_id=f"run_{sid}")
        await store.start_run(_run(f"run_{sid}", sid))
        assert await store.put_ui_data(sid, b'{"x": 1}') is not None
    await store.delete(top.id)
    for sid in (top.id, "task_a", "task_b"):
        assert await store.get(sid) is None, sid
        assert await store.session.load(sid) == [], sid
        assert await store.list_runs(session_id=sid) == [], sid
    assert await store.get(spawned.id) is not None  # a spawned chat is not a task: it stays


async def test_start_run_again_resumes_the_record(store: ChatStore) -> None:
    meta = await store.create()
    await store.start_run(_run("run_1", meta.id, source="schedule:s1", started_at=1000.0))
    await store.finish_run("run_1", status="interrupted")
    await store.start_run(_run("run_1", meta.id, source="user", started_at=2000.0))
    (row,) = await store.list_runs(session_id=meta.id)
    assert (row.status, row.started_at, row.source, row.finished_at) == ("running", 1000.0, "schedule:s1", None)


async def test_sweep_stale_runs_marks_them_interrupted_with_finished_at(
    store: ChatStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = store_schedules.OWNER.rsplit(":", 1)[0]
    meta = await store.create()
    monkeypatch.setattr(store_schedules, "OWNER", f"{host}:{gone.pid}")
    await store.start_run(_run("run_dead", meta.id))
    monkeypatch.undo()
    before = time.time()
    await store.sweep_stale_runs()
    (row,) = await store.list_runs(session_id=meta.id)
    assert row.status == "interrupted" and row.finished_at is not None and row.finished_at >= before
