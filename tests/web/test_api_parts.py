"""Each ``lovia.web.api`` router mounted alone in a bare FastAPI app answers its own routes (and
only those), with the documented bodies and error format."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from lovia import Agent
from lovia.web import ChatStore
from lovia.web.api import RouterDeps
from lovia.web.api.agents import agent_info, build_agents_router, model_name, resolve_context_window
from lovia.web.api.chat import build_chat_router
from lovia.web.api.schedules import build_schedules_router
from lovia.web.api.sessions import build_sessions_router
from lovia.web.api.workspace import build_workspace_router, workspace_cfg
from lovia.web.schemas import AgentInfo
from lovia.workspace import Workspace

from .helpers import scripted_agent


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """``make(builder, agents=None)``: a TestClient of a FastAPI app that mounts only that router."""
    clients: list[TestClient] = []

    def build(builder: Callable[[RouterDeps], APIRouter], agents: dict[str, Agent[Any]] | None = None) -> TestClient:
        deps = RouterDeps(
            agents=agents or {"bot": scripted_agent(name="bot")},
            store=ChatStore.sqlite(tmp_path / f"parts{len(clients)}.db"),
        )
        app = FastAPI(lifespan=_closing(deps))
        app.include_router(builder(deps))
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.__exit__(None, None, None)


def _closing(deps: RouterDeps) -> Any:
    import contextlib

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        try:
            async with deps.lifespan():
                yield
        finally:
            await deps.store.close()

    return lifespan


def _paths(client: TestClient) -> set[str]:
    return set(client.app.openapi()["paths"])  # type: ignore[attr-defined]


def test_the_agents_router_alone(make: Callable[..., TestClient]) -> None:
    http = make(build_agents_router)
    assert _paths(http) == {"/api/info", "/api/agents", "/api/agents/{name}"}
    info = http.get("/api/info").json()
    assert info["default_agent"] == "bot" and info["agents"] == ["bot"]
    listed = http.get("/api/agents").json()
    assert set(listed[0]) == set(AgentInfo.model_fields)
    detail = http.get("/api/agents/bot").json()
    assert detail["tools"] == ["lookup", "slow", "remove"] and detail["tool_details"][2]["needs_approval"] is True
    missing = http.get("/api/agents/nobody")
    assert missing.status_code == 404 and missing.json()["detail"]["code"] == "agent_not_found"


def test_agent_info_and_the_context_window() -> None:
    from lovia.context import Compaction

    agent = scripted_agent(name="bot")
    assert model_name(Agent(name="a", model="openai:gpt-x")) == "openai:gpt-x"
    assert resolve_context_window(agent, None) is None  # a scripted model names no window
    assert resolve_context_window(agent, Compaction(context_window=32_000)) == 32_000  # the server's policy
    windowed = agent.clone(context_policy=Compaction(context_window=8_000))
    assert resolve_context_window(windowed, None) == 8_000  # else the agent's own
    info = agent_info("served-as", agent, context_window=4096)
    assert isinstance(info, AgentInfo) and (info.name, info.context_window, info.memory) == ("served-as", 4096, False)


def test_the_chat_router_alone(make: Callable[..., TestClient]) -> None:
    http = make(build_chat_router)
    assert all(p.startswith("/api/chat") for p in _paths(http))
    answer = http.post("/api/chat", json={"message": "hello there"})
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"output", "session_id", "usage"} and body["output"] == "You said: hello there"
    schema = http.app.openapi()["paths"]["/api/chat"]["post"]["responses"]["200"]  # type: ignore[attr-defined]
    assert schema["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatResponse"}
    with http.stream("POST", "/api/chat/stream", json={"message": "again", "session_id": body["session_id"]}) as r:
        names = [line[len("event: ") :] for line in r.iter_lines() if line.startswith("event: ")]
    assert names[:2] == ["session", "snapshot"] and names[-1] == "done"
    question = http.get("/api/chat/question", params={"session_id": body["session_id"]})
    assert question.status_code == 501 and question.json()["detail"]["code"] == "feature_unavailable"
    none_live = http.post("/api/chat/inject", json={"session_id": body["session_id"], "message": "x"})
    assert none_live.status_code == 200 and none_live.json() == {"accepted": False}


def test_the_sessions_router_alone(make: Callable[..., TestClient]) -> None:
    http = make(build_sessions_router)
    paths = _paths(http)
    assert "/api/sessions/{session_id}/todos" in paths and "/api/sessions/{session_id}/fork" in paths
    assert "/api/runs" in paths and not any(p.startswith(("/api/chat", "/api/schedules")) for p in paths)
    sid = http.post("/api/sessions", json={"title": "empty"}).json()["id"]
    assert [s["id"] for s in http.get("/api/sessions").json()] == [sid]
    assert http.get(f"/api/sessions/{sid}/todos").json() == {"todos": []}
    assert http.post(f"/api/sessions/{sid}/followups").json() == {"followups": []}
    fork = http.post(f"/api/sessions/{sid}/fork", json={})
    assert fork.status_code == 409 and fork.json()["detail"]["code"] == "nothing_to_fork"
    assert http.get("/api/runs").json() == []
    assert http.delete(f"/api/sessions/{sid}").json() == {"deleted": sid}
    gone = http.get(f"/api/sessions/{sid}/todos")
    assert gone.status_code == 404 and gone.json()["detail"]["code"] == "session_not_found"


def test_the_schedules_router_alone(make: Callable[..., TestClient]) -> None:
    http = make(build_schedules_router)
    assert all(p.startswith("/api/schedules") for p in _paths(http))
    made = http.post("/api/schedules", json={"input": "tick", "trigger_kind": "every", "trigger_expr": "3600"})
    assert made.status_code == 200
    schedule_id = made.json()["id"]
    assert [s["id"] for s in http.get("/api/schedules").json()] == [schedule_id]
    assert http.patch(f"/api/schedules/{schedule_id}", json={"active": False}).json()["active"] is False
    assert http.delete(f"/api/schedules/{schedule_id}").json() == {"deleted": schedule_id}
    missing = http.get(f"/api/schedules/{schedule_id}")
    assert missing.status_code == 404 and missing.json()["detail"]["code"] == "schedule_not_found"


def test_the_workspace_router_alone(make: Callable[..., TestClient], tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    coder = Agent(name="coder", model="openai:gpt-x", workspace=Workspace.local(str(root)))
    assert workspace_cfg(coder) is not None and workspace_cfg(scripted_agent()) is None
    http = make(build_workspace_router, agents={"coder": coder, "bot": scripted_agent(name="bot")})
    assert all(p.startswith("/api/workspace") for p in _paths(http))
    assert http.get("/api/workspace").json()["agent"] == "coder"
    assert http.get("/api/workspace/file", params={"path": "notes.txt"}).json()["content"] == "hello\n"
    listing = http.get("/api/workspace/files").json()
    assert "notes.txt" in json.dumps(listing)
    bare = http.get("/api/workspace", params={"agent": "bot"})
    assert bare.status_code == 404 and bare.json()["detail"]["code"] == "feature_unavailable"
