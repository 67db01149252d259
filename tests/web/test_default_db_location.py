"""Where the web app keeps chats without ``--db`` / ``db_path``: ``./.lovia/<agent>.db``, as 0.9.119.

``create_app`` in a temporary working folder (real SQLite files), and ``python -m lovia.web
--app`` as a real child process there (SIGKILLed at the end).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore, create_app
from lovia.web.db_location import agent_file_stem, default_db_path

from .helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _agent(name: str) -> Agent[Any]:
    return Agent(name=name, model=ScriptedProvider(lambda _entries, _tools: text("ok")))


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".db") if folder.is_dir() else []


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", ["../../escape", "/etc/passwd", "..", "a/b\\c", "\x00", " . "])
def test_an_agent_name_shaped_like_a_path_names_a_file_inside_dot_lovia(cwd: Path, name: str) -> None:
    with TestClient(create_app(_agent(name))) as client:
        assert client.get("/api/sessions").status_code == 200
    (only,) = _files(cwd / ".lovia")
    assert only == f"{agent_file_stem(name)}.db" and "/" not in only and not only.startswith(".")
    assert sorted(p.name for p in cwd.iterdir()) == [".lovia"]


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("bot", "bot.db"),
        ("my.bot", "my-bot.db"),
        ("support  --  desk", "support-desk.db"),
        ("a..b__c", "a-b__c.db"),
        ("助手", "助手.db"),
        ("Ｂｏｔ", "Bot.db"),
        ("...", "agent.db"),
    ],
)
def test_create_app_names_the_file_after_the_agent(cwd: Path, name: str, file: str) -> None:
    with TestClient(create_app(_agent(name))) as client:
        sent = client.post("/api/chat", json={"message": "hi"})
        assert sent.status_code == 200, sent.text
    assert _files(cwd / ".lovia") == [file]


def test_an_existing_lovia_db_keeps_being_used_and_is_logged_once(cwd: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def seed() -> None:
        store = ChatStore.sqlite(cwd / ".lovia" / "lovia.db")
        await store.create(title="from before", agent="bot", session_id="old")
        await store.close()

    asyncio.run(seed())
    with caplog.at_level(logging.INFO, logger="lovia.web"):
        for _ in range(2):
            with TestClient(create_app(_agent("bot"))) as client:
                assert [s["title"] for s in client.get("/api/sessions").json()] == ["from before"]
    assert _files(cwd / ".lovia") == ["lovia.db"]
    told = [r.getMessage() for r in caplog.records if "lovia.db" in r.getMessage()]
    assert len(told) == 1 and "bot.db" in told[0]


def test_a_file_named_the_earlier_way_keeps_being_used(cwd: Path) -> None:
    (cwd / ".lovia").mkdir()
    earlier = cwd / ".lovia" / "my.bot.db"  # how our earlier releases spelled agent "my.bot"

    async def seed() -> None:
        store = ChatStore.sqlite(earlier)
        await store.create(title="kept", agent="my.bot", session_id="old")
        await store.close()

    asyncio.run(seed())
    with TestClient(create_app(_agent("my.bot"))) as client:
        assert [s["title"] for s in client.get("/api/sessions").json()] == ["kept"]
    assert _files(cwd / ".lovia") == ["my.bot.db"]
    assert default_db_path("your.bot") == "./.lovia/your-bot.db"  # an agent without an earlier file


def test_lovia_web_with_an_app_and_no_db_opens_the_agents_file(tmp_path: Path) -> None:
    (tmp_path / "served_app.py").write_text(
        "from lovia import Agent\n"
        "from lovia.testing import ScriptedProvider, text\n"
        "agent = Agent(name='Support Desk.v2', model=ScriptedProvider(lambda e, t: text('ok')))\n",
        encoding="utf-8",
    )
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("LOVIA_DB", None)
    argv = [
        sys.executable,
        "-m",
        "lovia.web",
        "--app",
        "served_app:agent",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    child = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert child.poll() is None, child.stdout.read() if child.stdout else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.05)
        sent = httpx.post(f"http://127.0.0.1:{port}/api/chat", json={"message": "hi"}, timeout=30)
        assert sent.status_code == 200, sent.text
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout:
            child.stdout.close()
    assert _files(tmp_path / ".lovia") == ["Support-Desk-v2.db"]
