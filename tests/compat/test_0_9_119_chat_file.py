"""lovia 0.9.119's web chat file, and our own earlier chat files, open in the web app.

Through the page's HTTP API (``create_app`` + ``TestClient``) on a copy of each file: the chats,
their transcripts, origins and task parents, the UI data blob, the schedule, and a new message
that continues a chat. The fixture files were written by 0.9.119 itself (see its README).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lovia import Agent
from lovia.exceptions import SchemaTooNewError
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry, TranscriptEntry
from lovia.web import ChatStore, create_app
from lovia.web.scheduler import ManualClock
from lovia.web.store.schema import CHAT_MIGRATIONS

from ._chat_ref import REF

OURS = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite"
needs_ref = pytest.mark.skipif(not (REF / "chat.db").exists(), reason=f"0.9.119's fixture files are not at {REF}")

# Before the fixture's schedule is due (it was made at 1796657106 to fire every hour).
BEFORE_DUE = 1796657200.0


def _answer(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said = next(e.text for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
    return text(f"answer to {said} after {len(entries)} entries")


def _app(db: Path) -> Any:
    agent = Agent(name="bot", model=ScriptedProvider(_answer))
    return create_app(agent, db_path=str(db), clock=ManualClock(BEFORE_DUE))


def _messages(detail: dict[str, Any]) -> list[list[Any]]:
    return [[e["role"], e["content"]] for e in detail["entries"]]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def ref_db(tmp_path: Path) -> Path:
    db = tmp_path / "chat.db"
    shutil.copyfile(REF / "chat.db", db)
    return db


@pytest.fixture
def expected() -> dict[str, Any]:
    return dict(json.loads((REF / "expected.json").read_text())["web"])


@pytest.fixture
def ref_client(ref_db: Path) -> Iterator[TestClient]:
    with TestClient(_app(ref_db)) as client:
        yield client


# ---------------------------------------------------------------------------------- refusals first


@needs_ref
def test_a_chat_file_from_a_newer_lovia_is_refused_and_left_as_it_was(ref_db: Path) -> None:
    newest = CHAT_MIGRATIONS[-1].version
    with sqlite3.connect(ref_db) as conn:
        conn.execute("UPDATE lovia_schema SET version = ? WHERE store = 'chat'", (newest + 1,))
    before = ref_db.read_bytes()
    with pytest.raises(SchemaTooNewError) as caught:
        ChatStore(session=_memory_session(), meta_path=ref_db, checkpointer=_memory_checkpointer())
    assert caught.value.hint and "upgrade lovia" in caught.value.hint
    assert ref_db.read_bytes() == before


@needs_ref
def test_our_migrated_file_records_a_chat_version_0_9_119_does_not_know(ref_client: TestClient, ref_db: Path) -> None:
    assert ref_client.get("/api/sessions").status_code == 200
    version = _rows(ref_db, "SELECT version FROM lovia_schema WHERE store = 'chat'")[0][0]
    assert version == CHAT_MIGRATIONS[-1].version and version > 2  # 0.9.119 knows up to 2: it refuses the file
    tables = {r[0] for r in _rows(ref_db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "chat_schedules" not in tables and not any(t.endswith("_0_9_119") for t in tables)


# ------------------------------------------------------------------------------ 0.9.119's chat file


@needs_ref
def test_chats_list_as_0_9_119_listed_them(ref_client: TestClient, expected: dict[str, Any]) -> None:
    listed = {s["id"]: s for s in ref_client.get("/api/sessions").json()}
    for sid, want in expected["sessions"].items():
        if sid.endswith(" (detail)"):
            continue
        got = listed[sid]
        assert (got["title"], got["pinned"], got["parent_id"], got["origin_kind"]) == (
            want["title"],
            want["pinned"],
            want["parent_id"],
            want["origin_kind"],
        ), sid
    assert list(listed)[0] == "5c4d6ce4ed0a40f1807f4f815fd08934"  # the pinned chat lists first
    assert "task-1" not in listed  # a subagent's task chat is reached from its parent, as in 0.9.119


@needs_ref
def test_each_chat_shows_its_messages_and_origin(ref_client: TestClient, expected: dict[str, Any]) -> None:
    for sid, want in expected["sessions"].items():
        if sid.endswith(" (detail)"):
            continue
        detail = ref_client.get(f"/api/sessions/{sid}").json()
        assert _messages(detail) == want["messages"], sid
        assert detail["origin_kind"] == want["origin_kind"]
    fork = ref_client.get("/api/sessions/281b73bc9bd44cfa962e4dfa0f5f660f").json()
    assert fork["origin"]["kind"] == "fork"
    assert fork["origin"]["session_id"] == "50a94337489d4c5aa074ba848742e24f" and fork["origin"]["exists"]


@needs_ref
def test_the_subagent_task_shows_its_parent(ref_client: TestClient, expected: dict[str, Any]) -> None:
    want = expected["sessions"]["task-1 (detail)"]
    response = ref_client.get("/api/sessions/task-1")
    assert response.status_code == want["status"]
    detail = response.json()
    assert detail["parent_id"] == want["parent_id"]
    assert detail["task_of"]["session_id"] == want["parent_id"] and detail["task_of"]["title"] == "hi there"
    assert _messages(detail) == want["messages"]


@needs_ref
def test_the_run_records_are_kept(ref_client: TestClient) -> None:
    history = ref_client.get("/api/runs/history", params={"session_id": "50a94337489d4c5aa074ba848742e24f"}).json()
    runs = {r["run_id"]: r for r in history["runs"]}
    assert set(runs) == {"26f60f47bbc849c497f16f021cdd4bb1", "8ac4dd14f2be4679baf018a86a57f432"}
    first = runs["26f60f47bbc849c497f16f021cdd4bb1"]
    assert (first["status"], first["agent"], first["source"], first["usage"]["total_tokens"]) == (
        "completed",
        "bot",
        "user",
        2,
    )


@needs_ref
def test_the_compressed_ui_data_blob_is_served_as_json(ref_client: TestClient, expected: dict[str, Any]) -> None:
    sid, ref, value = expected["ui_data"]
    response = ref_client.get(f"/api/sessions/{sid}/ui-data/{ref}")
    assert response.status_code == 200
    assert response.json() == value


@needs_ref
def test_the_schedule_moves_to_our_schedule_store(ref_client: TestClient, expected: dict[str, Any]) -> None:
    schedules = ref_client.get("/api/schedules").json()
    rows = schedules if isinstance(schedules, list) else schedules["schedules"]
    assert [s["input"] for s in rows] == expected["schedules"]
    (row,) = rows
    assert (row["id"], row["trigger_kind"], row["trigger_expr"], row["active"], row["agent"]) == (
        "ecffca4114ea4c2ebab1ba7b75b40316",
        "every",
        "3600",
        True,
        "bot",
    )
    assert row["next_fire"] == pytest.approx(1796660706.4144974)


@needs_ref
def test_a_new_message_continues_a_0_9_119_chat(ref_db: Path, expected: dict[str, Any]) -> None:
    sid = "5c4d6ce4ed0a40f1807f4f815fd08934"
    with TestClient(_app(ref_db)) as client:
        sent = client.post("/api/chat", json={"message": "and now?", "session_id": sid})
        assert sent.status_code == 200, sent.text
    with TestClient(_app(ref_db)) as client:  # reopened: nothing to migrate, everything kept
        detail = client.get(f"/api/sessions/{sid}").json()
    assert _messages(detail) == [
        *expected["sessions"][sid]["messages"],
        ["user", "and now?"],
        ["assistant", "answer to and now? after 3 entries"],
    ]
    assert detail["title"] == "Renamed" and detail["pinned"] is True


# ---------------------------------------------------------------------- our own earlier chat files


@pytest.mark.parametrize(
    ("fixture", "user_version"),
    [("chat_uv0.sql", 0), ("chat_uv2.sql", 2), ("chat_uv4.sql", 4), ("chat_v14.sql", 14)],
)
def test_our_earlier_chat_files_open_in_place(tmp_path: Path, fixture: str, user_version: int) -> None:
    """Files versioned by ``PRAGMA user_version`` only (``chat_uv*``), and frozen chat store versions (``chat_v*``)."""
    db = tmp_path / "ours.db"
    with sqlite3.connect(db) as conn:
        conn.executescript((OURS / fixture).read_text())
    with TestClient(_app(db)) as client:
        listed = {s["id"]: s for s in client.get("/api/sessions").json()}
        assert set(listed) == {"chat_a", "chat_b"}
        assert listed["chat_a"]["title"] == "First chat"
        assert listed["chat_a"]["pinned"] is (user_version > 0)  # the first release had no pin
        assert listed["chat_b"]["origin_kind"] == ("fork" if user_version > 0 else None)
        detail = client.get("/api/sessions/chat_a").json()
        assert _messages(detail) == [["user", "hello"], ["assistant", f"Hi from v{user_version}."]]
        assert detail["runs"] and client.get("/api/runs/history").json()["runs"][0]["run_id"] == "run_a"
        ui = client.get("/api/sessions/chat_a/ui-data/ud_1")
        assert ui.status_code == (200 if user_version >= 2 else 404)
        sent = client.post("/api/chat", json={"message": "more", "session_id": "chat_a"})
        assert sent.status_code == 200, sent.text
    assert _rows(db, "SELECT store, version FROM lovia_schema WHERE store = 'chat'") == [
        ("chat", CHAT_MIGRATIONS[-1].version)
    ]


def _memory_session() -> Any:
    from lovia.stores import InMemorySession

    return InMemorySession()


def _memory_checkpointer() -> Any:
    from lovia.stores import InMemoryCheckpointer

    return InMemoryCheckpointer()
