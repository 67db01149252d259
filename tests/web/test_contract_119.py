"""The HTTP shapes and status codes code written for lovia 0.9.119 expects, over real HTTP."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.web.run_deps import MAX_CLIENT_CONTEXT_BYTES
from lovia.workspace import Workspace

from .helpers import ThreadServer


def _agent(root: Path | None = None, *, name: str = "coder") -> Agent[None]:
    workspace = Workspace.local(str(root)) if root is not None else None
    return Agent(name=name, model=ScriptedProvider(lambda _e, _t: text("ok")), workspace=workspace)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[httpx.Client]:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "notes.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    app = create_app(_agent(root), db_path=str(tmp_path / "c.db"))
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        yield client


def _code(response: httpx.Response) -> str:
    return str(response.json()["detail"]["code"])


def test_collections_are_bare_json_arrays(http: httpx.Client) -> None:
    agents = http.get("/api/agents").json()
    assert isinstance(agents, list) and [a["name"] for a in agents] == ["coder"]
    assert http.get("/api/sessions").json() == [] and http.get("/api/runs").json() == []
    sid = http.post("/api/chat", json={"message": "hi"}).json()["session_id"]
    assert [row["id"] for row in http.get("/api/sessions").json()] == [sid]
    assert http.get("/api/runs").json() == []
    listed = http.get("/api/workspace/files")
    assert [e["name"] for e in listed.json()] == ["src", "notes.md"] and listed.headers["X-Total-Count"] == "2"
    assert sorted(e["path"] for e in http.get("/api/workspace/recent").json()) == ["notes.md", "src/app.py"]
    assert http.get(f"/api/sessions/{sid}/processes").json() == []
    unknown = http.get("/api/sessions/no_such_chat/processes")
    assert unknown.status_code == 200 and unknown.json() == []


class _Unnamed:
    """A hand-written provider that names no model (no ``model`` attribute at all)."""

    name = "homemade"

    async def stream(self, *_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError
        yield


def test_an_agent_reads_back_with_its_providers_own_model_name(tmp_path: Path) -> None:
    agents = {
        "named": Agent(name="named", model=ScriptedProvider(lambda _e, _t: text("ok"), model="m-1")),
        "scripted": _agent(name="scripted"),
        "homemade": Agent(name="homemade", model=_Unnamed()),  # type: ignore[arg-type]
        "by-string": Agent(name="by-string", model="openai:gpt-x"),
    }
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "a.db"))) as srv:
        details = {name: httpx.get(f"{srv.url}/api/agents/{name}").json() for name in agents}
        listed = {a["name"]: a["model"] for a in httpx.get(f"{srv.url}/api/agents").json()}
    keys = {"name", "instructions", "tools", "workspace", "memory", "context_window", "model"}
    for name, detail in details.items():
        assert keys <= set(detail), name
    models = {name: detail["model"] for name, detail in details.items()}
    assert models == {"named": "m-1", "scripted": None, "homemade": None, "by-string": "openai:gpt-x"}
    assert listed == models  # the list describes each agent the same way


def test_blank_messages_oversized_contexts_and_unreadable_attachments_are_422(http: httpx.Client) -> None:
    for path in ("/api/chat", "/api/chat/stream"):
        blank = http.post(path, json={"message": "  \n"})
        assert blank.status_code == 422 and _code(blank) == "invalid_request"
        big = http.post(path, json={"message": "hi", "context": {"blob": "x" * MAX_CLIENT_CONTEXT_BYTES}})
        assert big.status_code == 422 and _code(big) == "invalid_request" and big.json()["detail"]["hint"]
    gone = {"path": "uploads/gone.txt", "mime": "text/plain", "kind": "file"}
    outside = {"path": "../../etc/passwd", "mime": "text/plain", "kind": "file"}
    refused = http.post("/api/chat", json={"message": "read these", "attachments": [gone, outside]})
    assert refused.status_code == 422 and _code(refused) == "invalid_request"
    assert http.get("/api/sessions").json() == []  # nothing was started
    # One readable file is enough: the unreadable one is left out.
    mixed = http.post("/api/chat", json={"message": "read", "attachments": [gone, {**gone, "path": "notes.md"}]})
    assert mixed.status_code == 200, mixed.text
    chat = http.get(f"/api/sessions/{mixed.json()['session_id']}").json()
    assert "notes.md" in str(chat["entries"][0]["content"]) and "gone.txt" not in str(chat["entries"][0]["content"])


def test_workspace_reads_answer_404_for_missing_files_and_folders_and_403_outside(http: httpx.Client) -> None:
    for path, status, code in (
        ("missing.txt", 404, "file_not_found"),
        ("src", 404, "file_not_found"),
        ("../outside.txt", 403, "path_denied"),
        ("/etc/passwd", 403, "path_denied"),
    ):
        r = http.get("/api/workspace/file", params={"path": path})
        assert (r.status_code, _code(r)) == (status, code), path


def test_several_agents_name_no_default_and_memory_needs_an_agent(tmp_path: Path) -> None:
    from lovia import Memory

    keeper = _agent(name="keeper")
    keeper.plugins.append(Memory(tmp_path / "memory", index=None, auto_curate=False))
    app = create_app({"keeper": keeper, "plain": _agent(name="plain")}, db_path=str(tmp_path / "m.db"))
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        info = client.get("/api/info").json()
        assert info["default_agent"] is None and info["agents"] == ["keeper", "plain"]
        features = info["features"]
        for name in ("checkpointing", "titles", "followups", "scheduling", "workspace", "memory", "rewind", "events"):
            assert isinstance(features[name], bool), name
        assert features["memory"] is True and features["checkpointing"] is True and features["model_config"] is False
        unnamed = client.get("/api/memory")
        assert unnamed.status_code == 400 and _code(unnamed) == "invalid_request" and unnamed.json()["detail"]["hint"]
        assert client.get("/api/memory", params={"agent": "keeper"}).status_code == 200
    with ThreadServer(create_app(_agent(name="solo"), db_path=str(tmp_path / "s.db"))) as srv:
        assert httpx.get(f"{srv.url}/api/info").json()["default_agent"] == "solo"


def test_a_failed_tool_calls_result_frame_carries_the_error_text(tmp_path: Path) -> None:
    from lovia import tool
    from lovia.testing import call

    from .helpers import sse

    @tool
    def boom(q: str) -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    agent = Agent(name="a", model=ScriptedProvider([call("boom", {"q": "x"}), text("done")]), tools=[boom])
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "t.db"))) as srv:
        (frame,) = sse(srv.url, "/api/chat/stream", {"message": "go"}).of("tool_result")
    assert frame["is_error"] is True and isinstance(frame["result"], str) and "disk on fire" in frame["result"]


# --------------------------------------------------------------------------- workspace file routes


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[httpx.Client, Path]]:
    from lovia.workspace.types import WorkspaceLimits

    root = tmp_path / "files"
    root.mkdir()
    (root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    (root / "pic.avif").write_bytes(b"\x00\x00\x00\x1cftypavif" + b"\x00" * 8)
    (root / "draw.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (root / "page.html").write_text("<p>hi</p>")
    (root / "blob.bin").write_bytes(b"\x00\x01binary")
    (root / "huge.bin").write_bytes(b"x" * 5000)
    monkeypatch.setenv("LOVIA_UPLOAD_ALLOWED_EXT", "png, txt")
    monkeypatch.setenv("LOVIA_MAX_UPLOAD_MB", "0.001")  # 1048 bytes
    workspace = Workspace.local(str(root), limits=WorkspaceLimits(max_file_read_bytes=4000))
    agent = Agent(name="w", model=ScriptedProvider(lambda _e, _t: text("ok")), workspace=workspace)
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "f.db"))) as srv:
        with httpx.Client(base_url=srv.url + "/api/workspace", timeout=60) as client:
            yield client, root


def test_file_reports_its_lines_and_binary_files_come_back_empty(files: tuple[httpx.Client, Path]) -> None:
    http, root = files
    (root / "three.txt").write_text("a\nb\nc")
    doc = http.get("/file", params={"path": "three.txt"}).json()
    assert (doc["content"], doc["start"], doc["end"], doc["total_lines"]) == ("a\nb\nc", 1, 3, 3)
    assert doc["truncated"] is False and doc["binary"] is False
    blob = http.get("/file", params={"path": "blob.bin"})
    assert blob.status_code == 200 and blob.json()["binary"] is True and blob.json()["content"] == ""
    assert http.get("/file", params={"path": "huge.bin"}).status_code == 413  # over max_file_read_bytes


def test_a_file_over_the_preview_size_comes_back_truncated(tmp_path: Path) -> None:
    from lovia.web.api.workspace import MAX_PREVIEW_BYTES

    root = tmp_path / "w"
    root.mkdir()
    lines = MAX_PREVIEW_BYTES // 100 + 50
    (root / "long.txt").write_text(("y" * 99 + "\n") * lines)
    with ThreadServer(create_app(_agent(root), db_path=str(tmp_path / "t.db"))) as srv:
        doc = httpx.get(f"{srv.url}/api/workspace/file", params={"path": "long.txt"}, timeout=60).json()
    assert doc["truncated"] is True and doc["binary"] is False and doc["total_lines"] == lines
    assert doc["start"] == 1 and doc["end"] == len(doc["content"].splitlines()) < lines
    assert doc["content"].endswith("y\n") and len(doc["content"]) <= MAX_PREVIEW_BYTES


def test_raw_serves_only_raster_images_inline(files: tuple[httpx.Client, Path]) -> None:
    http, _root = files
    png = http.get("/raw", params={"path": "pic.png"})
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.headers["x-content-type-options"] == "nosniff" and png.headers["cache-control"] == "no-cache"
    assert png.headers["content-disposition"].startswith("inline")
    assert http.get("/raw", params={"path": "pic.avif"}).headers["content-type"] == "image/avif"
    for name in ("draw.svg", "page.html", "blob.bin"):
        refused = http.get("/raw", params={"path": name})
        assert refused.status_code == 415 and _code(refused) == "unsupported_file_type", name
        saved = http.get("/raw", params={"path": name, "download": 1})
        assert saved.status_code == 200 and saved.headers["content-disposition"].startswith("attachment"), name
    assert http.get("/raw", params={"path": "huge.bin", "download": 1}).status_code == 413


def test_raw_answers_304_for_the_version_the_client_holds(files: tuple[httpx.Client, Path]) -> None:
    http, root = files
    etag = http.get("/raw", params={"path": "pic.png"}).headers["etag"]
    for held in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = http.get("/raw", params={"path": "pic.png"}, headers={"If-None-Match": held})
        assert again.status_code == 304 and again.content == b"", held
    assert http.get("/raw", params={"path": "pic.png"}, headers={"If-None-Match": '"other"'}).status_code == 200
    (root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x01" * 40)
    changed = http.get("/raw", params={"path": "pic.png"}, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_upload_refuses_empty_files_and_honours_the_environment(files: tuple[httpx.Client, Path]) -> None:
    http, root = files
    empty = http.post("/upload", files={"file": ("empty.txt", b"", "text/plain")})
    assert empty.status_code == 422 and _code(empty) == "invalid_request"
    assert not (root / "uploads" / "empty.txt").exists()
    raw_empty = http.post("/upload", content=b"", headers={"X-Filename": "empty.txt"})
    assert raw_empty.status_code == 422
    plain = http.post("/upload", files={"file": ("Makefile", b"all:\n", "text/plain")})
    assert plain.status_code == 200 and plain.json()["kind"] == "file"
    assert http.post("/upload", files={"file": ("a.png", b"\x89PNG", "image/png")}).json()["kind"] == "image"
    refused = http.post("/upload", files={"file": ("a.pdf", b"%PDF", "application/pdf")})
    assert refused.status_code == 415 and _code(refused) == "unsupported_file_type"
    big = http.post("/upload", files={"file": ("big.txt", b"z" * 2000, "text/plain")})
    assert big.status_code == 413 and _code(big) == "file_too_large"


# --------------------------------------------------------------------------- chats


def test_an_unknown_chat_reads_as_empty_and_a_rewind_returns_the_entries_left(http: httpx.Client) -> None:
    unknown = http.get("/api/sessions/chat_never_was")
    assert unknown.status_code == 200 and unknown.json()["entries"] == [] and unknown.json()["title"] is None
    sid = http.post("/api/chat", json={"message": "one"}).json()["session_id"]
    http.post("/api/chat", json={"message": "two", "session_id": sid})
    before = http.get(f"/api/sessions/{sid}").json()["entries"]
    assert [m["role"] for m in before] == ["user", "assistant", "user", "assistant"]
    stamps = [m["timestamp"] for m in before]
    assert all(isinstance(t, float) for t in stamps) and stamps == sorted(stamps)
    rewound = http.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 1})
    assert rewound.status_code == 200
    body = rewound.json()
    assert body["removed"] == 2 and [m["content"] for m in body["entries"]] == ["one", "ok"]


def test_rewind_waits_for_a_stopped_run_to_wind_down(tmp_path: Path) -> None:
    import threading
    import time

    from lovia import tool
    from lovia.testing import call

    from .helpers import sse, wait_for

    @tool
    async def slow_sync(q: str) -> str:
        """Takes a while, and winds down slowly when stopped."""
        try:
            await asyncio.sleep(1.5)
        except asyncio.CancelledError:
            await asyncio.sleep(1.5)  # cleaning up
            raise
        return q

    def script(entries: list[Any], _tools: list[Any]) -> Any:
        from lovia.transcript import ToolResultEntry

        return text("done") if isinstance(entries[-1], ToolResultEntry) else call("slow_sync", {"q": "x"})

    agent = Agent(name="a", model=ScriptedProvider(script), tools=[slow_sync])
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "w.db"))) as srv:
        first = httpx.post(f"{srv.url}/api/chat", json={"message": "setup"}, timeout=30)
        sid = first.json()["session_id"]
        streaming = threading.Thread(
            target=sse, args=(srv.url, "/api/chat/stream", {"message": "again", "session_id": sid})
        )
        streaming.start()
        wait_for(lambda: httpx.get(f"{srv.url}/api/runs").json())
        stopping = threading.Thread(
            target=httpx.post, args=(f"{srv.url}/api/chat/cancel",), kwargs={"params": {"session_id": sid}}
        )
        stopping.start()
        time.sleep(0.2)  # the stop is in, the run still sleeps in its tool
        rewound = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 0}, timeout=30)
        stopping.join(30)
        streaming.join(30)
    assert rewound.status_code == 200, rewound.text


def test_an_existing_chat_keeps_its_agent_and_exports_as_json(tmp_path: Path) -> None:
    agents = {"first": _agent(name="first"), "second": _agent(name="second")}
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "a.db"))) as srv:
        sid = httpx.post(f"{srv.url}/api/chat", json={"message": "hi", "agent": "first"}, timeout=30).json()
        sid = sid["session_id"]
        again = httpx.post(f"{srv.url}/api/chat", json={"message": "more", "session_id": sid, "agent": "second"})
        assert again.status_code == 200
        runs = httpx.get(f"{srv.url}/api/runs/history", params={"session_id": sid}).json()["runs"]
        assert [r["agent"] for r in runs] == ["first", "first"]
        exported = httpx.get(f"{srv.url}/api/sessions/{sid}/export", params={"format": "json"}).json()
    assert (exported["session_id"], exported["agent"]) == (sid, "first") and "title" in exported
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant", "user", "assistant"]
    for key in ("role", "content", "reasoning", "tool_calls", "is_error"):
        assert key in exported["messages"][0], key


def test_create_app_token_rules(tmp_path: Path) -> None:
    async def allow() -> None:
        return None

    with pytest.raises(ValueError, match="not both"):
        create_app(_agent(), db_path=str(tmp_path / "t.db"), token="abc", auth=allow)
    with pytest.raises(ValueError, match="non-empty"):
        create_app(_agent(), db_path=str(tmp_path / "t.db"), token="   ")
    app = create_app(_agent(), db_path=str(tmp_path / "t.db"), token="  s3cret \n")
    with ThreadServer(app) as srv:
        ok = httpx.get(f"{srv.url}/api/sessions", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


# --------------------------------------------------------------------------- the page


def test_chat_ui_takes_one_script_and_protocol_relative_urls(tmp_path: Path) -> None:
    from lovia.web import ChatUI

    ui = ChatUI(scripts="//cdn.example.com/x.js")
    assert list(ui.scripts) == ["//cdn.example.com/x.js"]
    with ThreadServer(create_app(_agent(), db_path=str(tmp_path / "u.db"), ui=ui)) as srv:
        page = httpx.get(srv.url + "/", timeout=30)
    assert "//cdn.example.com/x.js" in page.text
    assert re.search(r"script-src [^\"]*cdn\.example\.com", page.text)  # the page's CSP lets it in


# The regions 0.9.119's web-server docs list for styling ("Region | data-part"), less the three
# drawn per step of a run (`tool`, `activity`, `message-actions`): the served page carries these.
DOCUMENTED_PARTS = (
    *("sidebar", "sidebar-header", "agent-switcher", "sidebar-nav", "new-chat", "memory", "schedules"),
    *("settings", "sessions-label", "sessions-search", "sessions"),
    *("topbar", "chat-title", "topbar-actions", "tasks", "export", "files-toggle"),
    *("view", "transcript", "welcome", "todo-panel", "turn", "composer", "attach", "context-ring"),
    *("files-panel", "language"),
)


def _served_parts(html: str) -> list[tuple[str, str | None]]:
    """``(data-part, data-role)`` of every element of ``html``, ``<template>`` contents included."""
    from html.parser import HTMLParser

    found: list[tuple[str, str | None]] = []

    class Parts(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            named = dict(attrs)
            part = named.get("data-part")
            if part:
                found.append((part, named.get("data-role")))

    Parts().feed(html)
    return found


def test_the_served_page_carries_every_documented_region(tmp_path: Path) -> None:
    assert len(DOCUMENTED_PARTS) == 27 == len(set(DOCUMENTED_PARTS))
    with ThreadServer(create_app(_agent(), db_path=str(tmp_path / "p.db"))) as srv:
        page = httpx.get(srv.url + "/", timeout=30)
    assert page.status_code == 200
    found = _served_parts(page.text)
    parts = [part for part, _role in found]
    assert sorted(set(DOCUMENTED_PARTS) - set(parts)) == []
    for part in DOCUMENTED_PARTS:
        if part != "turn":
            assert parts.count(part) == 1, part  # one region each, nothing drawn twice
    assert sorted(role or "" for part, role in found if part == "turn") == ["assistant", "user"]


def test_chat_ui_default_lang_needs_strings() -> None:
    from lovia.exceptions import UserError
    from lovia.web import ChatUI

    with pytest.raises(UserError, match="no strings"):
        ChatUI(default_lang="fr")
    assert ChatUI(default_lang="fr", messages={"fr": {"composer.placeholder": "Demandez…"}}).default_lang == "fr"
    assert ChatUI(default_lang="zh").default_lang == "zh"


# --------------------------------------------------------------------------- run_deps hooks


def test_a_stop_while_the_hook_runs_drops_the_run(tmp_path: Path) -> None:
    import threading

    from .helpers import wait_for

    entered, release = threading.Event(), threading.Event()

    async def hook(_trigger: Any) -> None:
        entered.set()
        await asyncio.to_thread(release.wait, 20)

    app = create_app(_agent(), db_path=str(tmp_path / "h.db"), run_deps=hook)
    with ThreadServer(app) as srv:
        box: dict[str, httpx.Response] = {}
        body = {"message": "hi", "session_id": "chat_hooked"}
        sender = threading.Thread(target=lambda: box.update(r=httpx.post(f"{srv.url}/api/chat", json=body, timeout=30)))
        sender.start()
        wait_for(entered.is_set)
        stopped = httpx.post(f"{srv.url}/api/chat/cancel", params={"session_id": "chat_hooked"}, timeout=30)
        assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
        release.set()
        sender.join(30)
        assert box["r"].status_code == 409 and _code(box["r"]) == "run_cancelled"
        assert httpx.get(f"{srv.url}/api/runs/history").json()["runs"] == []
        assert httpx.get(f"{srv.url}/api/sessions").json() == []  # nothing was written


def test_tool_image_stubs_count_image_parts_only(tmp_path: Path) -> None:
    import base64

    from lovia import tool
    from lovia.parts import ImagePart, TextPart
    from lovia.testing import call
    from lovia.transcript import ToolResultEntry

    from .helpers import sse

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )

    @tool(returns_images=True)
    def captioned() -> Any:
        """A caption, then a picture."""
        return [TextPart("a red dot"), ImagePart(data=base64.b64encode(png).decode(), mime_type="image/png")]

    def script(entries: list[Any], _tools: list[Any]) -> Any:
        return text("seen") if isinstance(entries[-1], ToolResultEntry) else call("captioned", {}, call_id="c_pic")

    agent = Agent(name="pics", model=ScriptedProvider(script), tools=[captioned])
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "p.db"))) as srv:
        stream = sse(srv.url, "/api/chat/stream", {"message": "show"})
        (frame,) = stream.of("tool_result")
        assert frame["images"] == [{"index": 0, "mime_type": "image/png"}]
        sid = stream.of("session")[0]["session_id"]
        (stored,) = [m for m in httpx.get(f"{srv.url}/api/sessions/{sid}").json()["entries"] if m["role"] == "tool"]
        assert stored["images"] == [{"index": 0, "mime_type": "image/png"}]
        served = httpx.get(f"{srv.url}/api/sessions/{sid}/tool-images/c_pic/0")
        assert served.status_code == 200 and served.content == png


def test_a_report_for_a_chat_with_a_live_run_goes_into_its_mailbox(tmp_path: Path) -> None:
    import threading

    from fastapi.testclient import TestClient

    from lovia.plugins.subagents import SubagentReport
    from lovia.web.subagents import subagent_deliver

    from .helpers import Gate, iter_frames, scripted_agent, wait_for

    gate = Gate()
    app = create_app(scripted_agent(gate), db_path=str(tmp_path / "r.db"))
    with TestClient(app) as client:
        frames: list[Any] = []

        def stream() -> None:
            with client.stream("POST", "/api/chat/stream", json={"message": "slow run"}) as response:
                frames.extend(iter_frames(response))

        reader = threading.Thread(target=stream)
        reader.start()
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
        sid = client.get("/api/runs").json()[0]["session_id"]
        report = SubagentReport(
            id="task_x", agent="helper", prompt="p", session_id=sid, result=None, error=None, text="the answer is 4"
        )
        client.portal.call(subagent_deliver(app.state.deps), report)  # type: ignore[union-attr]
        gate.release.set()
        reader.join(30)
    injected = [f.data["content"] for f in frames if f.event == "user_injected"]
    assert len(injected) == 1 and "the answer is 4" in injected[0]


def test_an_interrupted_runs_turns_show_and_rewind_from_its_checkpoint(tmp_path: Path) -> None:
    import threading

    from .helpers import Gate, scripted_agent, sse, wait_for

    db, gate = str(tmp_path / "i.db"), Gate()
    with ThreadServer(create_app(scripted_agent(gate), db_path=db)) as srv:
        sid = httpx.post(f"{srv.url}/api/chat", json={"message": "hello"}, timeout=30).json()["session_id"]
        body = {"message": "slow run", "session_id": sid}
        streaming = threading.Thread(target=lambda: sse(srv.url, "/api/chat/stream", body))
        streaming.start()
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
    gate.release.set()  # the server shut down mid-run: the run is interrupted, its checkpoint kept
    streaming.join(30)

    def signed_in_only(trigger: Any) -> None:
        # An app whose runs need a person's request: the new server does not resume on its own,
        # so the chat keeps its interrupted run for this view.
        if trigger.request is None:
            raise PermissionError("no one asked for this run")

    with ThreadServer(create_app(scripted_agent(Gate()), db_path=db, run_deps=signed_in_only)) as srv:
        detail = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
        assert detail["active_run_id"]
        users = [m["content"] for m in detail["entries"] if m["role"] == "user"]
        assert users == ["hello", "slow run"]  # the stored turn, then the checkpoint's, the user message once
        missing = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 5})
        assert missing.status_code == 404 and _code(missing) == "turn_not_found"
        assert httpx.get(f"{srv.url}/api/sessions/{sid}").json()["active_run_id"]  # left intact
        rewound = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 1})
        assert rewound.status_code == 200 and rewound.json()["removed"] == 0
        after = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
    assert after["active_run_id"] is None
    assert [m["content"] for m in after["entries"] if m["role"] == "user"] == ["hello"]
