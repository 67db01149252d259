"""The chat index's contract, run against SQLite and PostgreSQL alike: every public method of the
store the web app keeps its chats, origins, UI data, variants, uploads, run records and schedules in."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lovia.exceptions import UserError
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web.store import ChatIndex, ChatStore, UploadRecord
from lovia.web.store import runs as store_schedules

from .backends import BACKENDS, Backend, open_backend
from .backends import run_row as _run
from .backends import schedule_row as _sched

T0 = 1_800_000_000.0


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async for opened in open_backend(request.param, tmp_path):
        yield opened


@pytest.fixture
def store(backend: Backend) -> ChatStore:
    return backend.store


# --------------------------------------------------------------------------- unknown chats and bad ids


def test_each_backend_provides_the_whole_chat_index(store: ChatStore) -> None:
    assert isinstance(store, ChatIndex)
    assert not isinstance(object(), ChatIndex)  # the check looks at the members: a bare object fails it


async def test_an_unknown_chat_reads_as_absent_everywhere(store: ChatStore) -> None:
    assert await store.get("chat_missing") is None
    assert await store.get_active_run_id("chat_missing") is None
    assert await store.get_active_context("chat_missing") is None
    assert await store.origin("chat_missing") is None
    assert await store.children("chat_missing") == []
    assert await store.list_children("chat_missing") == []
    assert await store.runs("chat_missing") == {}
    assert await store.variants("chat_missing") == {}
    assert await store.uploads("chat_missing") == []
    assert await store.put_ui_data("chat_missing", b"{}") is None
    assert await store.get_ui_data("chat_missing", "anything") is None
    assert await store.fork("chat_missing") is None
    await store.delete("chat_missing")  # nothing to delete is not an error
    assert await store.ids() == [] and await store.list() == []


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "x" * 300])
async def test_a_chat_id_breaking_the_rule_is_refused_with_a_hint(store: ChatStore, bad: str) -> None:
    with pytest.raises(UserError) as caught:
        await store.upsert(bad)
    assert caught.value.hint
    with pytest.raises(UserError):
        await store.create(session_id=bad)
    assert await store.ids() == []


# --------------------------------------------------------------------------- chats


async def test_upsert_titles_pins_list_and_search(store: ChatStore) -> None:
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


async def test_create_keeps_an_existing_chat_and_update_touches_only_when_asked(store: ChatStore) -> None:
    made = await store.create(title="first", agent="bot", session_id="chat_c")
    again = await store.create(title="second", agent="other", session_id="chat_c")
    assert (again.title, again.agent, again.created_at) == ("first", "bot", made.created_at)
    fresh = await store.create()
    assert fresh.id != "chat_c" and fresh.id.startswith("chat_")
    assert sorted(await store.ids()) == sorted(["chat_c", fresh.id])
    await store.update("chat_c", title="renamed", pinned=True, touch=False)
    kept = await store.get("chat_c")
    assert kept is not None and (kept.title, kept.pinned, kept.updated_at) == ("renamed", True, made.updated_at)
    time.sleep(0.01)
    await store.update("chat_c")
    touched = await store.get("chat_c")
    assert touched is not None and touched.updated_at > made.updated_at and touched.title == "renamed"


async def test_titles_untitled_is_none_and_set_title_strips_and_cuts(store: ChatStore) -> None:
    meta = await store.create()
    assert meta.title is None and meta.to_dict()["title"] is None
    await store.set_title(meta.id, "  " + "t" * 200 + "  ")
    title = (await store.get(meta.id)).title  # type: ignore[union-attr]
    assert title == "t" * 120
    await store.set_title(meta.id, "  short  ")
    assert (await store.get(meta.id)).title == "short"  # type: ignore[union-attr]


async def test_set_title_if_unchanged_keeps_a_rename_made_meanwhile(store: ChatStore) -> None:
    await store.upsert("chat_t", title="make the report")
    await store.set_title("chat_t", "My name for it")  # the user renames while a title is computed
    await store.set_title_if_unchanged("chat_t", "Report request", expected="make the report")
    assert (await store.get("chat_t")).title == "My name for it"  # type: ignore[union-attr]
    await store.set_title_if_unchanged("chat_t", "Report request", expected="My name for it")
    assert (await store.get("chat_t")).title == "Report request"  # type: ignore[union-attr]
    await store.upsert("chat_u")
    await store.set_title_if_unchanged("chat_u", "Named", expected=None)  # None: still untitled
    assert (await store.get("chat_u")).title == "Named"  # type: ignore[union-attr]


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


# --------------------------------------------------------------------------- the run in flight


async def test_the_run_in_flight_and_its_client_context(store: ChatStore) -> None:
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
    await store.set_active_run("chat_r", "run_3")
    assert await store.get_active_run_id("chat_r") == "run_3"
    await store.set_active_run("chat_r", None)
    assert await store.get_active_run_id("chat_r") is None


# --------------------------------------------------------------------------- UI data


async def test_put_ui_data_needs_the_chat(store: ChatStore) -> None:
    assert await store.put_ui_data("chat_missing", b"{}") is None
    assert await store.get_ui_data("chat_missing", "anything") is None
    await store.upsert("chat_ui")
    ref = await store.put_ui_data("chat_ui", b'{"rows": [1]}')
    assert ref is not None and await store.get_ui_data("chat_ui", ref) == b'{"rows": [1]}'


async def test_copy_ui_data_gives_a_branch_the_same_refs_once(store: ChatStore) -> None:
    await store.upsert("chat_from")
    await store.upsert("chat_to")
    ref = await store.put_ui_data("chat_from", b'{"a": 1}')
    assert ref is not None and await store.get_ui_data("chat_to", ref) is None  # a ref belongs to its chat
    await store.copy_ui_data("chat_from", "chat_to")
    await store.copy_ui_data("chat_from", "chat_to")  # again: no duplicate, no error
    assert await store.get_ui_data("chat_to", ref) == b'{"a": 1}'
    await store.delete("chat_from")
    assert await store.get_ui_data("chat_to", ref) == b'{"a": 1}'  # the copy is the branch's own


# --------------------------------------------------------------------------- forks, origins and task trees


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


async def test_fork_copies_history_up_to_a_ref(store: ChatStore) -> None:
    first, second = await _two_turn_chat(store, "chat_src")
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
    by_turn = await store.fork("chat_src", user_turn=1)
    assert by_turn is not None and len(await store.session.load(by_turn)) == 2
    assert await store.fork("chat_src", user_turn=5) is None


async def test_origins_record_where_a_chat_came_from(store: ChatStore) -> None:
    assert store.supports_origins
    await store.upsert("chat_parent", title="Parent")
    await store.upsert("chat_fork")
    await store.set_origin("chat_fork", kind="fork", origin_session_id="chat_parent", user_turn=2, title="Parent")
    assert await store.origin("chat_fork") == {
        "kind": "fork",
        "session_id": "chat_parent",
        "user_turn": 2,
        "title": "Parent",
        "exists": True,
    }
    await store.set_origin("chat_fork", kind="fork", origin_session_id="chat_parent", user_turn=None, title="P")
    changed = await store.origin("chat_fork")
    assert changed is not None and (changed["user_turn"], changed["title"]) == (None, "P")  # replaced, not added
    await store.upsert("chat_spawn", spawned_from="chat_parent")
    await store.upsert("chat_task", parent_id="chat_parent")
    kinds = [(m.id, kind) for m, kind in await store.children("chat_parent")]
    assert kinds == [("chat_spawn", "spawn"), ("chat_task", "subagent")]  # a fork is not a child
    await store.delete("chat_parent")
    gone = await store.origin("chat_fork")
    assert gone is not None and gone["exists"] is False  # the fork stays and knows its origin is gone
    assert await store.get("chat_spawn") is not None and await store.get("chat_task") is None


async def test_children_and_a_task_tree_deeper_than_one(store: ChatStore) -> None:
    await store.upsert("chat_root", title="root")
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


# --------------------------------------------------------------------------- answer variants


async def test_variants_keep_earlier_answers_by_turn_until_a_rewind_drops_them(store: ChatStore) -> None:
    assert store.supports_variants
    await store.upsert("chat_v")
    await store.add_variant("chat_v", 0, [{"type": "assistant_text", "content": "first"}])
    await store.add_variant("chat_v", 0, [{"type": "assistant_text", "content": "second"}])
    await store.add_variant("chat_v", 2, [{"type": "assistant_text", "content": "later"}])
    kept = await store.variants("chat_v")
    assert sorted(kept) == [0, 2]
    assert [v["entries"][0]["content"] for v in kept[0]] == ["first", "second"]  # oldest first
    assert all(isinstance(v["created_at"], float) for v in kept[0])
    await store.drop_variants("chat_v", from_turn=1)
    assert sorted(await store.variants("chat_v")) == [0]
    await store.drop_variants("chat_v", from_turn=0)
    assert await store.variants("chat_v") == {}


# --------------------------------------------------------------------------- uploads


async def test_an_upload_is_listed_with_a_readable_file_until_its_chat_goes(store: ChatStore, tmp_path: Path) -> None:
    await store.upsert("chat_up")
    source = store.uploads_dir / "chat_up" / "up_1.txt"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(b"report body")
    await store.add_upload(UploadRecord("up_1", "chat_up", "Report.TXT", "text/plain", 11, str(source), T0))
    (listed,) = await store.uploads("chat_up")
    assert (listed.id, listed.name, listed.mime_type, listed.size, listed.created_at) == (
        "up_1",
        "Report.TXT",
        "text/plain",
        11,
        T0,
    )
    assert Path(listed.path).read_bytes() == b"report body"
    assert "path" not in listed.to_dict()
    await store.delete("chat_up")
    assert await store.uploads("chat_up") == []
    assert not Path(listed.path).exists()


# --------------------------------------------------------------------------- deletes and schedules


async def test_deleting_a_chat_deletes_its_tasks_at_any_depth(store: ChatStore) -> None:
    top = await store.create(title="top")
    await store.upsert("task_a", parent_id=top.id)
    await store.upsert("task_b", parent_id="task_a")
    spawned = await store.create(title="spawned")
    await store.set_origin(spawned.id, kind="spawn", origin_session_id=top.id, user_turn=None, title="top")
    for sid in (top.id, "task_a", "task_b"):
        await store.session.append(sid, [InputEntry(role="user", content=f"hi {sid}")], run_id=f"run_{sid}")
        await store.start_run(_run(f"run_{sid}", session_id=sid, agent="a", started_at=1000.0))
        assert await store.put_ui_data(sid, b'{"x": 1}') is not None
    await store.delete(top.id)
    for sid in (top.id, "task_a", "task_b"):
        assert await store.get(sid) is None, sid
        assert await store.session.load(sid) == [], sid
        assert await store.list_runs(session_id=sid) == [], sid
    assert await store.get(spawned.id) is not None  # a spawned chat is not a task: it stays


async def test_delete_takes_the_chats_schedules_unless_told_not_to(store: ChatStore) -> None:
    schedules = store.schedule_store
    assert schedules is not None
    for sid in ("chat_1", "chat_2", "chat_3"):
        await store.upsert(sid)
        await schedules.add(_sched(f"sch_{sid}_1", session_id=sid))
    await schedules.add(_sched("sch_chat_1_2", session_id="chat_1"))
    await store.delete("chat_1")
    assert await store.get("chat_1") is None and list(await schedules.list(session_id="chat_1")) == []
    assert [r.id for r in await schedules.list(session_id="chat_2")] == ["sch_chat_2_1"]
    await store.delete("chat_2", schedules=False)
    assert await store.get("chat_2") is None
    assert [r.id for r in await schedules.list(session_id="chat_2")] == ["sch_chat_2_1"]  # kept
    await store.upsert("chat_4")
    await store.delete_all()
    assert await store.list() == [] and list(await schedules.list(session_id="chat_3")) == []


async def test_schedule_methods(store: ChatStore) -> None:
    await store.add_schedule(_sched("a", session_id="chat1", until="done", context={"k": 1}))
    await store.add_schedule(_sched("b", next_fire=T0 + 5))
    got = await store.get_schedule("a")
    assert got == _sched("a", session_id="chat1", until="done", context={"k": 1})
    assert await store.get_schedule("nope") is None
    assert [r.id for r in await store.list_schedules()] == ["a", "b"]
    assert [r.id for r in await store.list_schedules(session_id="chat1")] == ["a"]

    await store.update_schedule(dataclasses.replace(got, input="pong", max_fires=4))
    again = await store.get_schedule("a")
    assert again is not None and (again.input, again.max_fires) == ("pong", 4)

    assert [r.id for r in await store.due_schedules(T0 + 10)] == ["b"]
    assert [r.id for r in await store.due_schedules(T0 + 60)] == ["b", "a"]

    await store.mark_fired("b", next_fire=T0 + 65, active=True, last_session_id="chat9")
    fired = await store.get_schedule("b")
    assert fired is not None and (fired.next_fire, fired.fire_count, fired.last_session_id) == (T0 + 65, 1, "chat9")
    await store.mark_fired("b", next_fire=T0 + 65, active=False, last_session_id=None, finished_reason="max_fires")
    done = await store.get_schedule("b")
    assert done is not None and (done.active, done.finished_reason, done.fire_count) == (False, "max_fires", 2)
    assert done.last_session_id == "chat9"  # None keeps the last chat
    assert [r.id for r in await store.due_schedules(T0 + 100)] == ["a"]

    await store.set_schedule_active("a", active=False, finished_reason="paused")
    paused = await store.get_schedule("a")
    assert paused is not None and (paused.active, paused.finished_reason) == (False, "paused")
    await store.set_schedule_active("a", active=True, next_fire=T0 + 500)
    resumed = await store.get_schedule("a")
    assert resumed is not None
    assert (resumed.active, resumed.finished_reason, resumed.next_fire) == (True, None, T0 + 500)

    assert await store.delete_schedule("a")
    assert not await store.delete_schedule("a")
    assert [r.id for r in await store.list_schedules()] == ["b"]
    await store.mark_fired("nope", next_fire=T0, active=True, last_session_id=None)  # an unknown one: no error
    await store.set_schedule_active("nope", active=False)
    assert await store.get_schedule("nope") is None


# --------------------------------------------------------------------------- run records


async def test_run_methods(store: ChatStore) -> None:
    R0 = time.time() - 3600  # noqa: N806  (runs finish in real time: start them in the past)
    await store.start_run(_run("r1", session_id="c1", started_at=R0))
    await store.start_run(_run("r2", session_id="c1", source="schedule:s1", started_at=R0 + 10))
    await store.start_run(_run("r3", session_id="c2", source="schedule:s1", started_at=R0 + 20))
    await store.finish_run("r1", status="completed", usage={"requests": 1})
    await store.finish_run("r3", status="failed", error="ProviderError: down")

    rows = await store.list_runs()
    assert [r.id for r in rows] == ["r3", "r2", "r1"]
    r1 = next(r for r in rows if r.id == "r1")
    assert (r1.status, r1.usage, r1.agent, r1.source) == ("completed", {"requests": 1}, "bot", "user")
    assert r1.finished_at is not None and r1.finished_at >= r1.started_at
    r3 = next(r for r in rows if r.id == "r3")
    assert (r3.status, r3.error) == ("failed", "ProviderError: down")

    assert [r.id for r in await store.list_runs(session_id="c1")] == ["r2", "r1"]
    assert [r.id for r in await store.list_runs(source="schedule:s1")] == ["r3", "r2"]
    assert [r.id for r in await store.list_runs(limit=1, offset=1)] == ["r2"]
    finished = r1.finished_at
    assert {r.id for r in await store.list_runs(since=finished)} >= {"r1"}
    assert "r2" not in {r.id for r in await store.list_runs(since=R0)}  # still running: not finished since

    assert await store.latest_run_statuses(["c1", "c2", "nochat"]) == {"c1": "running", "c2": "failed"}
    latest = await store.latest_run_for("schedule:s1")
    assert latest is not None and latest.id == "r3"
    assert await store.latest_run_for("schedule:none") is None

    # a resumed run starts again under its id: running, no error, its start kept
    await store.start_run(_run("r3", session_id="c2", source="schedule:s1", started_at=R0 + 99))
    again = await store.latest_run_for("schedule:s1")
    assert again is not None and (again.status, again.error, again.started_at) == ("running", None, R0 + 20)


async def test_record_run_and_the_run_history(store: ChatStore) -> None:
    await store.record_run("run_a", "chat_h", status="running")
    await store.record_run("run_a", "chat_h", status="completed", usage={"requests": 2}, finished=True)
    await store.record_run("run_a", "chat_h", status="completed", finished=True)  # no usage: the recorded one stays
    time.sleep(0.01)
    await store.record_run("run_b", "chat_h", status="failed", finished=True)
    await store.record_run("run_c", "chat_other", status="running")
    records = await store.runs("chat_h")
    assert sorted(records) == ["run_a", "run_b"]
    a = records["run_a"]
    assert (a.status, a.usage, a.source, a.damaged) == ("completed", {"requests": 2}, "user", None)
    assert a.finished_at is not None and a.finished_at >= a.started_at and a.owner
    assert [r.run_id for r in await store.run_history(session_id="chat_h")] == ["run_b", "run_a"]
    assert [r.run_id for r in await store.run_history(limit=1)] == ["run_c"]
    assert [r.run_id for r in await store.run_history(limit=1, offset=2)] == ["run_a"]
    assert [r.run_id for r in await store.run_history(source="user", session_id="chat_other")] == ["run_c"]
    assert await store.run_history(source="schedule:x") == []
    since = [r.run_id for r in await store.run_history(since=a.finished_at)]
    assert "run_a" in since and "run_c" not in since  # a running run has not finished since anything
    assert set(records["run_b"].history_dict()) >= {"run_id", "session_id", "status", "usage", "started_at"}
    assert records["run_b"].to_dict()["id"] == "run_b"  # the 0.9.119 form names it id, with a duration


async def test_start_run_again_resumes_the_record(store: ChatStore) -> None:
    meta = await store.create()
    await store.start_run(_run("run_1", session_id=meta.id, agent="a", source="schedule:s1", started_at=1000.0))
    await store.finish_run("run_1", status="interrupted")
    await store.start_run(_run("run_1", session_id=meta.id, agent="a", source="user", started_at=2000.0))
    (row,) = await store.list_runs(session_id=meta.id)
    assert (row.status, row.started_at, row.source, row.finished_at) == ("running", 1000.0, "schedule:s1", None)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_sweep_marks_a_dead_servers_running_runs_interrupted(backend: Backend) -> None:
    store = backend.store
    host = socket.gethostname()
    for rid in ("dead", "alive", "mine", "elsewhere", "done"):
        await store.start_run(_run(rid, session_id=rid))
    owners = {
        "dead": f"{host}:{_dead_pid()}",
        "alive": f"{host}:{os.getppid()}",
        "elsewhere": "some-other-host.invalid:1",
        "done": f"{host}:{_dead_pid()}",
    }
    for rid, owner in owners.items():
        backend.execute(f"UPDATE {backend.table('chat_runs', 'web_runs')} SET owner = ? WHERE run_id = ?", (owner, rid))
    await store.finish_run("done", status="completed")

    await store.sweep_stale_runs()
    statuses = {r.id: r.status for r in await store.list_runs()}
    assert statuses == {
        "dead": "interrupted",
        "alive": "running",
        "mine": "running",
        "elsewhere": "running",
        "done": "completed",
    }


async def test_sweep_stale_runs_marks_them_interrupted_with_finished_at(
    store: ChatStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = store_schedules.OWNER.rsplit(":", 1)[0]
    meta = await store.create()
    monkeypatch.setattr(store_schedules, "OWNER", f"{host}:{gone.pid}")
    await store.start_run(_run("run_dead", session_id=meta.id, agent="a", started_at=1000.0))
    monkeypatch.undo()
    before = time.time()
    await store.sweep_stale_runs()
    (row,) = await store.list_runs(session_id=meta.id)
    assert row.status == "interrupted" and row.finished_at is not None and row.finished_at >= before


# --------------------------------------------------------------------------- reopening


async def test_a_reopened_store_finds_what_was_written(backend: Backend, tmp_path: Path) -> None:
    store = backend.store
    await store.upsert("chat_keep", title="kept", agent="bot")
    await store.set_pinned("chat_keep", True)
    await store.record_run("run_k", "chat_keep", status="completed", finished=True)
    ref = await store.put_ui_data("chat_keep", b'{"k": 1}')
    await store.close()
    async for again in open_backend(backend.kind, tmp_path, where=backend.where):
        meta = await again.store.get("chat_keep")
        assert meta is not None and (meta.title, meta.agent, meta.pinned) == ("kept", "bot", True)
        assert list(await again.store.runs("chat_keep")) == ["run_k"]
        assert ref is not None and await again.store.get_ui_data("chat_keep", ref) == b'{"k": 1}'
