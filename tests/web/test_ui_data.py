"""Bulk UI data: ``put_ui_data`` inside a ``lovia web`` run, ``GET /api/sessions/{id}/ui-data/{ref}``.

Real runs over real HTTP (uvicorn in a thread) on an SQLite file and on PostgreSQL; the model is a
ScriptedProvider that records the tool outputs it was shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, Runner, tool
from lovia.exceptions import ToolError
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry
from lovia.web import ChatStore, create_app, put_ui_data, ui_result
from lovia.web.components import ENVELOPE_KEY, MAX_UI_DATA_BYTES
from lovia.web.store import PostgresChatStore

from .helpers import ThreadServer, last_user

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec and _spec.loader
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

ROWS = 10_000
SEEN: list[str] = []  # every tool output the model was shown, in order


@tool
async def run_query(n: int = ROWS) -> str:
    """All rows for the page, a preview for the model."""
    rows = [[f"row {i}", i] for i in range(n)]
    ref = await put_ui_data({"columns": ["name", "n"], "rows": rows})
    return ui_result("table", {"columns": ["name", "n"], "rows": rows[:5], "row_count": n}, data=ref)


@tool
async def huge() -> str:
    """Tries to store more than the limit allows."""
    ref = await put_ui_data({"blob": "x" * (MAX_UI_DATA_BYTES + 1)})
    return ui_result("table", {"columns": ["a"], "rows": []}, data=ref)


@tool
async def not_json() -> str:
    """Tries to store a value JSON cannot encode."""
    await put_ui_data({"when": object()})
    return "unreachable"


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said, results = last_user(entries)
    if results:
        last = entries[-1]
        assert isinstance(last, ToolResultEntry)
        SEEN.append(last.output)
        return text("done")
    return call(said.split()[0], {})


def agent() -> Agent[Any]:
    return Agent(name="bulk", model=ScriptedProvider(script), tools=[run_query, huge, not_json])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, _pg.requires_pg])])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ThreadServer, ChatStore]]:
    schema = None
    if request.param == "sqlite":
        store = ChatStore.sqlite(tmp_path / "web.db")
    else:
        schema = _pg.new_schema("uidata")
        store = PostgresChatStore(_pg.DSN, schema=schema)
    with ThreadServer(create_app(agent(), store=store)) as srv:
        yield srv, store
    if schema is not None:
        _pg.drop_schema(schema)


def chat(base: str, message: str) -> tuple[str, dict[str, Any]]:
    """Run one message to the end; the chat id and the last tool result entry."""
    r = httpx.post(f"{base}/api/chat", json={"message": message}, timeout=60)
    assert r.status_code == 200, r.text
    sid = r.json()["session_id"]
    entries = httpx.get(f"{base}/api/sessions/{sid}", timeout=30).json()["transcript"]
    return sid, [e for e in entries if e["type"] == "tool_result"][-1]


def test_stored_data_is_served_and_the_model_sees_only_the_preview(site: tuple[ThreadServer, ChatStore]) -> None:
    srv, _store = site
    SEEN.clear()
    sid, result = chat(srv.url, "run_query")
    envelope = json.loads(result["output"])[ENVELOPE_KEY]
    ref = envelope["data"]
    assert isinstance(ref, str) and ref
    assert envelope["props"]["row_count"] == ROWS and len(envelope["props"]["rows"]) == 5
    # What the model read is the small envelope, not the 10,000 rows.
    assert SEEN == [result["output"]] and len(SEEN[0]) < 500

    r = httpx.get(f"{srv.url}/api/sessions/{sid}/ui-data/{ref}", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    full = r.json()
    assert (
        full["columns"] == ["name", "n"]
        and len(full["rows"]) == ROWS
        and full["rows"][-1] == [f"row {ROWS - 1}", ROWS - 1]
    )


def test_unknown_refs_and_other_chats_are_404_with_the_error_body(site: tuple[ThreadServer, ChatStore]) -> None:
    srv, _store = site
    sid, result = chat(srv.url, "run_query")
    ref = json.loads(result["output"])[ENVELOPE_KEY]["data"]
    other, _ = chat(srv.url, "run_query")

    def detail(path: str) -> dict[str, Any]:
        r = httpx.get(srv.url + path, timeout=30)
        assert r.status_code == 404, r.text
        body = r.json()
        assert set(body["detail"]) == {"code", "message", "hint"} and body["detail"]["hint"]
        return dict(body["detail"])

    assert detail(f"/api/sessions/{sid}/ui-data/ud_nope")["code"] == "ui_data_not_found"
    assert detail(f"/api/sessions/{other}/ui-data/{ref}")["code"] == "ui_data_not_found"  # a ref is per chat
    assert detail(f"/api/sessions/chat_missing/ui-data/{ref}")["code"] == "session_not_found"


def test_deleting_the_chat_deletes_its_data(site: tuple[ThreadServer, ChatStore]) -> None:
    srv, store = site
    sid, result = chat(srv.url, "run_query")
    ref = json.loads(result["output"])[ENVELOPE_KEY]["data"]
    assert httpx.get(f"{srv.url}/api/sessions/{sid}/ui-data/{ref}", timeout=30).status_code == 200
    assert _rows_left(store, sid) == 1
    assert httpx.delete(f"{srv.url}/api/sessions/{sid}", timeout=30).status_code == 200
    r = httpx.get(f"{srv.url}/api/sessions/{sid}/ui-data/{ref}", timeout=30)
    assert r.status_code == 404 and r.json()["detail"]["code"] == "session_not_found"

    assert _rows_left(store, sid) == 0  # the rows are gone, not just hidden behind the missing chat


def _rows_left(store: ChatStore, session_id: str) -> int:
    """The chat's stored UI data rows, counted straight in the database."""
    if isinstance(store, PostgresChatStore):
        import psycopg

        with psycopg.connect(_pg.DSN) as conn:
            row = conn.execute(
                f'SELECT count(*) FROM "{store.schema}".web_ui_data WHERE session_id = %s', (session_id,)
            ).fetchone()
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            row = conn.execute("SELECT count(*) FROM chat_ui_data WHERE session_id = ?", (session_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_branched_chat_keeps_the_data(site: tuple[ThreadServer, ChatStore]) -> None:
    srv, _store = site
    sid, result = chat(srv.url, "run_query")
    ref = json.loads(result["output"])[ENVELOPE_KEY]["data"]
    fork = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={}, timeout=30)
    assert fork.status_code == 200, fork.text
    new = fork.json()["session_id"]
    assert httpx.delete(f"{srv.url}/api/sessions/{sid}", timeout=30).status_code == 200
    r = httpx.get(f"{srv.url}/api/sessions/{new}/ui-data/{ref}", timeout=30)
    assert r.status_code == 200 and len(r.json()["rows"]) == ROWS


def test_over_the_limit_is_a_tool_error_the_model_sees(site: tuple[ThreadServer, ChatStore]) -> None:
    srv, _store = site
    SEEN.clear()
    _sid, result = chat(srv.url, "huge")
    assert result["is_error"] is True
    assert "over the 8388608-byte limit" in result["output"] and "narrow" in result["output"]
    assert SEEN and "over the" in SEEN[0]  # the run went on: the model got the error and answered
    _sid, result = chat(srv.url, "not_json")
    assert result["is_error"] is True and "not JSON" in result["output"]


def test_outside_a_web_run_put_ui_data_returns_none() -> None:
    assert asyncio.run(put_ui_data({"rows": [[1]]})) is None
    SEEN.clear()
    result = Runner.run_sync(agent(), "run_query")
    assert result.output == "done"
    envelope = json.loads(SEEN[0])[ENVELOPE_KEY]
    assert "data" not in envelope and envelope["props"]["row_count"] == ROWS
    # Over the limit is still refused the same way when there is somewhere to store it; outside a
    # run there is not, so the tool decides what to show with the preview alone.
    assert asyncio.run(put_ui_data({"blob": "x" * (MAX_UI_DATA_BYTES + 1)})) is None


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, _pg.requires_pg])])
def test_store_round_trip_and_delete(kind: str, tmp_path: Path) -> None:
    async def go() -> None:
        schema = _pg.new_schema("uidata") if kind == "postgres" else None
        store = ChatStore.sqlite(tmp_path / "s.db") if schema is None else PostgresChatStore(_pg.DSN, schema=schema)
        try:
            meta = await store.create(title="t")
            other = await store.create(title="u")
            payload = json.dumps({"rows": [[i, "ü"] for i in range(1000)]}, ensure_ascii=False).encode()
            ref = await store.put_ui_data(meta.id, payload)
            second = await store.put_ui_data(meta.id, b"[]")
            kept = await store.put_ui_data(other.id, b"{}")
            assert ref != second
            copy = await store.create(title="branch")
            await store.copy_ui_data(meta.id, copy.id)
            await store.copy_ui_data(meta.id, copy.id)  # twice: nothing doubles, nothing fails
            assert await store.get_ui_data(copy.id, ref) == payload
            assert await store.get_ui_data(meta.id, ref) == payload
            assert await store.get_ui_data(other.id, ref) is None
            await store.delete(meta.id)
            assert await store.get_ui_data(meta.id, ref) is None and await store.get_ui_data(meta.id, second) is None
            assert await store.get_ui_data(other.id, kept) == b"{}"  # another chat's data stays
            assert await store.get_ui_data(copy.id, second) == b"[]"
        finally:
            await store.close()
            if schema is not None:
                _pg.drop_schema(schema)

    asyncio.run(go())


def test_put_ui_data_refuses_with_tool_errors_inside_a_bound_context() -> None:
    from lovia.web.components import bind_ui_data

    class Memory:
        def __init__(self) -> None:
            self.saved: list[tuple[str, bytes]] = []

        async def put_ui_data(self, session_id: str, payload: bytes) -> str:
            self.saved.append((session_id, payload))
            return f"ref{len(self.saved)}"

    async def go(memory: Memory) -> None:
        bind_ui_data(memory, "chat_1")
        assert await put_ui_data({"a": [1, 2]}) == "ref1"
        assert await put_ui_data("x" * (MAX_UI_DATA_BYTES - 2)) == "ref2"  # exactly the limit, quotes included
        with pytest.raises(ToolError) as too_big:
            await put_ui_data("x" * (MAX_UI_DATA_BYTES - 1))
        assert too_big.value.hint
        with pytest.raises(ToolError):
            await put_ui_data(float("nan"))

    memory = Memory()
    asyncio.run(go(memory))
    assert [(sid, len(p)) for sid, p in memory.saved] == [("chat_1", 11), ("chat_1", MAX_UI_DATA_BYTES)]
    assert asyncio.run(put_ui_data(1)) is None  # the binding stayed inside that task's context
