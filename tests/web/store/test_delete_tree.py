"""Deleting a chat takes its task chats at any depth and everything they own, in one transaction."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lovia.checkpointer import RunHead
from lovia.exceptions import StoreError
from lovia.transcript import InputEntry
from lovia.web.store import ScheduleRow, UploadRecord

from .backends import BACKENDS, Backend, open_backend

CHATS = ("root", "task", "subtask")


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async for opened in open_backend(request.param, tmp_path):
        yield opened


def _schedule(chat_id: str) -> ScheduleRow:
    now = time.time()
    return ScheduleRow(
        id=f"sched_{chat_id}",
        agent=None,
        input="ping",
        session_id=chat_id,
        trigger_kind="every",
        trigger_expr="60",
        next_fire=now + 60,
        active=True,
        last_session_id=None,
        created_at=now,
        updated_at=now,
    )


async def _fill(backend: Backend, tmp_path: Path) -> dict[str, str]:
    """Three chats (a task of a task) each with a transcript, a checkpoint, a run record, UI data,
    an answer variant and a bound schedule; the root has an upload. Their UI data refs."""
    store = backend.store
    parent = None
    refs = {}
    for chat_id in CHATS:
        await store.upsert(chat_id, title=chat_id, parent_id=parent)
        parent = chat_id
        run_id = f"run_{chat_id}"
        await store.session.append(chat_id, [InputEntry(role="user", content=f"hi {chat_id}")], run_id=run_id)
        await store.checkpointer.append(f"live_{chat_id}", [], RunHead(agent_name="a"))
        await store.set_active_run_id(chat_id, f"live_{chat_id}")
        await store.record_run(run_id, chat_id, status="completed", finished=True)
        ref = await store.put_ui_data(chat_id, b'{"rows": [1]}')
        assert ref is not None
        refs[chat_id] = ref
        await store.add_variant(chat_id, 0, [{"type": "assistant_text", "content": "earlier"}])
        await store.add_schedule(_schedule(chat_id))
    file = store.uploads_dir / "root" / "up_1.txt"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("attached")
    await store.add_upload(UploadRecord("up_1", "root", "a.txt", "text/plain", 8, str(file), time.time()))
    return refs


async def _kept(backend: Backend, refs: dict[str, str]) -> dict[str, list[bool]]:
    """For each kind of data, whether each chat still has it."""
    store = backend.store
    out: dict[str, list[bool]] = {}
    for chat_id in CHATS:
        have = {
            "index row": await store.get(chat_id) is not None,
            "transcript": bool(await store.session.segments(chat_id)),
            "checkpoint": await store.checkpointer.load(f"live_{chat_id}") is not None,
            "run record": bool(await store.runs(chat_id)),
            "ui data": await store.get_ui_data(chat_id, refs[chat_id]) is not None,
            "variant": bool(await store.variants(chat_id)),
            "schedule": await store.get_schedule(f"sched_{chat_id}") is not None,
        }
        for what, kept in have.items():
            out.setdefault(what, []).append(kept)
    out["upload"] = [bool(await store.uploads("root"))]
    return out


async def test_a_failure_late_in_the_delete_deletes_nothing(backend: Backend, tmp_path: Path) -> None:
    refs = await _fill(backend, tmp_path)
    # The root's index row is the last thing the delete removes: everything else was already gone.
    backend.refuse_deleting("root")
    with pytest.raises(StoreError, match="injected failure") as caught:
        await backend.store.delete("root")
    assert caught.value.hint
    kept = await _kept(backend, refs)
    assert kept == {what: [True] * len(flags) for what, flags in kept.items()}
    assert (backend.store.uploads_dir / "root" / "up_1.txt").exists() or backend.kind == "postgres"


async def test_a_delete_takes_the_whole_task_tree(backend: Backend, tmp_path: Path) -> None:
    refs = await _fill(backend, tmp_path)
    backend.refuse_deleting("root")
    with pytest.raises(StoreError):
        await backend.store.delete("root")
    backend.allow_deleting()
    await backend.store.delete("root")
    kept = await _kept(backend, refs)
    assert kept == {what: [False] * len(flags) for what, flags in kept.items()}
    assert await backend.store.ids() == []


async def test_deleting_a_task_keeps_its_parent(backend: Backend, tmp_path: Path) -> None:
    refs = await _fill(backend, tmp_path)
    await backend.store.delete("task")
    kept = await _kept(backend, refs)
    assert kept.pop("upload") == [True]
    assert kept == {what: [True, False, False] for what in kept}
