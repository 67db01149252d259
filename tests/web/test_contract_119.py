"""The HTTP shapes and status codes code written for lovia 0.9.119 expects, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
