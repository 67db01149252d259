"""The HTTP API page (``http-api.md``) checked from the outside, the usual FastAPI way.

Each test follows one statement of the page: a route, its status codes, the request and answer
bodies, the one error body, the SSE frames and their payloads, paging and search, tokens, the
router on its own, and mounting under a prefix. The model is ``lovia.testing.ScriptedProvider``;
chats live in SQLite files under ``tmp_path``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel

from lovia import Agent, ProviderError, RunBudget, Todo, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import ChatStore, RouterDeps, RunTrigger, build_api_router, create_app, put_ui_data, ui_result
from lovia.web.auth import token_dependency
from lovia.workspace import Workspace

from .outsider_kit import (
    Hold,
    app_client,
    collect,
    events_of,
    first,
    hold_agent,
    parse_sse,
    read_until,
    rest_of,
    scripted,
    wait_until,
)

# --------------------------------------------------------------------------- helpers


def error_of(response: Any) -> dict[str, Any]:
    """The ``detail`` of an API error, checked to have the documented shape."""
    body = response.json()
    assert set(body) == {"detail"}, body
    detail = body["detail"]
    assert isinstance(detail, dict), body
    assert isinstance(detail["code"], str) and isinstance(detail["message"], str), body
    assert "hint" not in detail or detail["hint"] is None or isinstance(detail["hint"], str), body
    return detail


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    detail = error_of(response)
    assert detail["code"] == code, detail
    return detail


class RejectingProvider:
    """A model endpoint that refuses the API key (what a wrong key looks like)."""

    name = "rejecting"
    model = "nope-1"
    supports_json_schema = False

    async def stream(self, entries: Any, *, tools: Any = None, response_format: Any = None, settings: Any = None):
        raise ProviderError("invalid api key", status_code=401, retryable=False)
        yield  # pragma: no cover - an async generator that fails at once


def start_held_stream(client: TestClient, hold: Hold, body: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """Open a chat stream whose run parks in ``wait_here``; returns (context, response, frames so far)."""
    ctx = client.stream("POST", "/api/chat/stream", json=body)
    response = ctx.__enter__()
    assert response.status_code == 200, response.read()
    frames = read_until(response, lambda ev, data: ev == "tool_call")
    assert hold.entered.wait(10)
    return ctx, response, frames


# --------------------------------------------------------------------------- integrations


def test_ui_false_serves_the_api_without_the_page(tmp_path: Path) -> None:
    with app_client(scripted("hi"), tmp_path, ui=False) as client:
        assert client.get("/").status_code == 404
        assert client.get("/static/style.css").status_code == 404
        assert client.get("/api/info").status_code == 200
        assert client.post("/api/chat", json={"message": "hello"}).json()["output"] == "hi"


def test_create_app_serves_the_page_at_root(tmp_path: Path) -> None:
    with app_client(scripted("hi"), tmp_path) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "<html" in page.text.lower()


def test_router_in_your_own_app(tmp_path: Path) -> None:
    deps = RouterDeps(agents={"bot": scripted("routed answer")}, store=ChatStore.in_memory())
    app = FastAPI(lifespan=deps.lifespan)
    app.include_router(build_api_router(deps))

    @app.get("/mine")
    async def mine() -> dict[str, str]:
        return {"ok": "yes"}

    with TestClient(app) as client:
        answer = client.post("/api/chat", json={"message": "hello"})
        assert answer.status_code == 200
        assert answer.json()["output"] == "routed answer"
        assert [s["id"] for s in client.get("/api/sessions").json()] == [answer.json()["session_id"]]
        assert client.get("/mine").json() == {"ok": "yes"}
        assert client.get("/healthz").status_code == 404  # /healthz belongs to create_app, not the router


def test_router_deps_needs_only_agents_and_store() -> None:
    deps = RouterDeps(agents={"bot": scripted("x")}, store=ChatStore.in_memory())
    assert deps.max_turns == 50
    assert deps.max_background_runs == 8
    assert deps.approval_timeout is None
    assert deps.scheduler_poll == 1.0
    assert deps.title == "lovia"
    assert deps.budget is None and deps.retry is None and deps.tracer is None
    assert deps.default_agent == "bot"


def test_deps_lifespan_inside_your_own_lifespan_fires_schedules() -> None:
    deps = RouterDeps(agents={"bot": scripted("scheduled answer")}, store=ChatStore.in_memory(), scheduler_poll=0.05)
    seen: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        seen.append("mine up")
        async with deps.lifespan():
            yield
        seen.append("mine down")

    app = FastAPI(lifespan=lifespan)
    app.include_router(build_api_router(deps))
    with TestClient(app) as client:
        created = client.post(
            "/api/schedules", json={"input": "do it", "trigger_kind": "at", "trigger_expr": str(time.time() + 0.2)}
        )
        assert created.status_code in (200, 201), created.text
        sid = created.json()["id"]
        runs = wait_until(lambda: client.get(f"/api/schedules/{sid}/runs").json(), timeout=15)
        assert runs[0]["run_id"]
        history = wait_until(
            lambda: [
                r
                for r in client.get("/api/runs/history", params={"source": f"schedule:{sid}"}).json()["runs"]
                if r["status"] == "completed"
            ],
            timeout=15,
        )
        chat = client.get(f"/api/sessions/{history[0]['session_id']}").json()
        assert [m["content"] for m in chat["entries"] if m["role"] == "assistant"] == ["scheduled answer"]
    assert seen == ["mine up", "mine down"]


def test_mounted_create_app_under_a_prefix(tmp_path: Path) -> None:
    lovia_app = create_app(scripted("mounted answer"), db_path=tmp_path / "chat.db")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with lovia_app.state.deps.lifespan():
            yield

    app = FastAPI(lifespan=lifespan)
    app.mount("/lovia", lovia_app)
    with TestClient(app) as client:
        page = client.get("/lovia/")
        assert page.status_code == 200 and "<html" in page.text.lower()
        answer = client.post("/lovia/api/chat", json={"message": "hi"})
        assert answer.status_code == 200 and answer.json()["output"] == "mounted answer"
        assert client.get("/lovia/api/sessions").json()[0]["id"] == answer.json()["session_id"]
        assert client.get("/lovia/healthz").json() == {"status": "ok"}


# --------------------------------------------------------------------------- authentication

GUARDED = [
    ("GET", "/api/info"),
    ("GET", "/api/agents"),
    ("GET", "/api/sessions"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/history"),
    ("GET", "/api/schedules"),
    ("POST", "/api/chat"),
    ("POST", "/api/chat/stream"),
    ("DELETE", "/api/sessions"),
]


@pytest.mark.parametrize(("method", "path"), GUARDED)
def test_token_guards_every_business_route(tmp_path: Path, method: str, path: str) -> None:
    with app_client(scripted("hi"), tmp_path, token="s3cret") as client:
        body = {"message": "hi"} if method == "POST" else None
        assert_error(client.request(method, path, json=body), 401, "server_token")
        wrong = client.request(method, path, json=body, headers={"Authorization": "Bearer nope"})
        assert_error(wrong, 401, "server_token")


def test_bearer_token_lets_requests_and_chat_streams_in(tmp_path: Path) -> None:
    with app_client(scripted("hi", "streamed"), tmp_path, token="s3cret") as client:
        auth = {"Authorization": "Bearer s3cret"}
        assert client.get("/api/info", headers=auth).status_code == 200
        assert client.post("/api/chat", json={"message": "a"}, headers=auth).json()["output"] == "hi"
        frames = collect(client, "/api/chat/stream", {"message": "b"}, headers=auth)
        assert first(frames, "done")["output"] == "streamed"


def test_healthz_stays_open_under_token_and_auth(tmp_path: Path) -> None:
    async def deny(request: Request) -> None:
        raise HTTPException(status_code=401)

    with app_client(scripted("hi"), tmp_path, token="s3cret") as client:
        assert client.get("/healthz").status_code == 200
    with app_client(scripted("hi"), tmp_path / "b", auth=deny) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/info").status_code == 401


def test_events_authenticate_with_the_token_cookie(tmp_path: Path) -> None:
    with app_client(scripted("hi"), tmp_path, token="s3cret") as client:
        assert_error(client.get("/api/events"), 401, "server_token")
        client.cookies.set("lovia_token", "s3cret")
        with client.stream("GET", "/api/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")


def test_a_rejected_provider_key_is_a_run_error_not_a_401(tmp_path: Path) -> None:
    agent = Agent(name="bot", model=RejectingProvider())
    with app_client(agent, tmp_path, token="s3cret") as client:
        frames = collect(client, "/api/chat/stream", {"message": "hi"}, headers={"Authorization": "Bearer s3cret"})
        error = first(frames, "error")
        assert error["code"] == "provider_auth"
        assert error["status_code"] == 401
        assert error["retryable"] is False
        assert isinstance(error["type"], str) and "invalid api key" in error["message"]
        assert "done" not in events_of(frames)


def test_the_router_alone_has_no_authentication() -> None:
    deps = RouterDeps(agents={"bot": scripted("x")}, store=ChatStore.in_memory())
    app = FastAPI(lifespan=deps.lifespan)
    app.include_router(build_api_router(deps))
    with TestClient(app) as client:
        assert client.get("/api/sessions").status_code == 200


def test_token_dependency_guards_a_mounted_router() -> None:
    deps = RouterDeps(agents={"bot": scripted("x")}, store=ChatStore.in_memory())
    app = FastAPI(lifespan=deps.lifespan)
    app.include_router(build_api_router(deps), dependencies=[Depends(token_dependency("tok"))])
    with TestClient(app) as client:
        assert_error(client.get("/api/sessions"), 401, "server_token")
        assert client.get("/api/sessions", headers={"Authorization": "Bearer tok"}).status_code == 200


def test_api_docs_are_served(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        assert client.get("/api/docs").status_code == 200
        schema = client.get("/api/openapi.json").json()
        assert "/api/chat/stream" in schema["paths"] and "/api/sessions/{session_id}" in schema["paths"]


def test_api_docs_follow_the_token(tmp_path: Path) -> None:
    """A deliberate deviation (docs/web.md, Auth): under a token the schema needs it too."""
    with app_client(scripted("x"), tmp_path, token="s3cret") as client:
        assert client.get("/api/openapi.json").status_code == 401
        assert client.get("/api/openapi.json", headers={"Authorization": "Bearer s3cret"}).status_code == 200


# --------------------------------------------------------------------------- the error body


def test_every_route_error_has_code_message_and_hint(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        unknown = client.get("/api/sessions/nope")  # an unknown chat reads as an empty one
        assert unknown.status_code == 200 and unknown.json()["entries"] == []
        for response in (
            client.patch("/api/sessions/nope", json={"title": "x"}),
            client.delete("/api/sessions/nope"),
            client.get("/api/sessions/nope/export"),
            client.get("/api/sessions/nope/todos"),
        ):
            assert_error(response, 404, "session_not_found")


def test_validation_keeps_fastapis_list_shape(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        response = client.post("/api/chat/approve", json={"session_id": "s", "call_id": "c", "decision": "maybe"})
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail
        assert {"loc", "msg", "type"} <= set(detail[0])
        assert client.post("/api/chat", json={}).status_code == 422  # message is required


def test_a_custom_auth_dependency_keeps_its_own_error(tmp_path: Path) -> None:
    async def my_auth(request: Request) -> None:
        if request.headers.get("x-user") != "ann":
            raise HTTPException(status_code=401, detail="sign in first")

    with app_client(scripted("x"), tmp_path, auth=my_auth) as client:
        refused = client.get("/api/sessions")
        assert refused.status_code == 401
        assert refused.json() == {"detail": "sign in first"}
        assert client.get("/api/sessions", headers={"x-user": "ann"}).status_code == 200


def test_unknown_agent_is_agent_not_found(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        assert_error(client.get("/api/agents/nobody"), 404, "agent_not_found")
        assert_error(client.post("/api/chat", json={"message": "hi", "agent": "nobody"}), 404, "agent_not_found")
        assert client.get("/api/sessions").json() == []


def test_unknown_schedule_is_schedule_not_found(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        assert_error(client.get("/api/schedules/nope"), 404, "schedule_not_found")
        assert_error(client.patch("/api/schedules/nope", json={"active": False}), 404, "schedule_not_found")
        assert_error(client.delete("/api/schedules/nope"), 404, "schedule_not_found")
        assert_error(client.post("/api/schedules/nope/run"), 404, "schedule_not_found")
        assert_error(client.get("/api/schedules/nope/runs"), 404, "schedule_not_found")


def test_nothing_live_is_run_not_found(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        assert_error(client.post("/api/chat/cancel", params={"session_id": sid}), 404, "run_not_found")
        assert_error(client.post("/api/chat/reconnect", params={"session_id": sid}), 404, "run_not_found")
        assert client.post("/api/chat/inject", json={"session_id": sid, "message": "x"}).json() == {"accepted": False}


def test_run_failed_and_too_many_runs_and_run_active(tmp_path: Path) -> None:
    hold = Hold()
    agents = {"bot": hold_agent(hold), "broken": Agent(name="broken", model=RejectingProvider())}
    with app_client(agents, tmp_path, max_background_runs=1, max_queued_runs=0) as client:
        failed = client.post("/api/chat", json={"message": "hi", "agent": "broken"})
        detail = assert_error(failed, 500, "run_failed")
        assert "invalid api key" in detail["message"]
        ctx, _response, frames = start_held_stream(client, hold, {"message": "hold on"})
        try:
            sid = first(frames, "session")["session_id"]
            assert_error(client.post("/api/chat", json={"message": "second", "session_id": sid}), 409, "run_active")
            too_many = client.post("/api/chat/stream", json={"message": "another chat"})
            assert_error(too_many, 429, "too_many_runs")
            assert_error(client.post("/api/chat", json={"message": "and another"}), 429, "too_many_runs")
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)


def test_blocking_turn_stopped_is_run_cancelled(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold), tmp_path) as client:
        result: dict[str, Any] = {}

        def blocking() -> None:
            result["response"] = client.post("/api/chat", json={"message": "wait", "session_id": "chat_blocking_1"})

        worker = threading.Thread(target=blocking)
        worker.start()
        assert hold.entered.wait(10)
        assert client.post("/api/chat/cancel", params={"session_id": "chat_blocking_1"}).status_code == 200
        worker.join(20)
        assert_error(result["response"], 409, "run_cancelled")


def test_fork_errors(tmp_path: Path) -> None:
    with app_client(scripted("one"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        ref = client.get(f"/api/sessions/{sid}").json()["entries"][0]["ref"]
        assert_error(client.post(f"/api/sessions/{sid}/fork", json={"ref": ref}), 409, "nothing_to_fork")
        gone = ref.split(":")[0] + ":7"
        assert_error(client.post(f"/api/sessions/{sid}/fork", json={"ref": gone}), 404, "turn_not_found")
        assert_error(client.post("/api/sessions/nope/fork", json={}), 404, "session_not_found")


def test_questions_without_a_channel_are_feature_unavailable(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        answer = client.post("/api/chat/answer", json={"session_id": "s", "answer": "yes"})
        assert answer.status_code == 501 and error_of(answer)["code"] == "feature_unavailable"


def test_memory_and_workspace_of_an_agent_without_them_are_feature_unavailable(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        assert_error(client.get("/api/memory"), 404, "feature_unavailable")
        assert_error(client.get("/api/workspace/files"), 404, "feature_unavailable")


# --------------------------------------------------------------------------- info and agents


def test_info(tmp_path: Path) -> None:
    agents = {"alpha": scripted("x", name="alpha"), "beta": scripted("y", name="beta")}
    with app_client(agents, tmp_path, title="Acme") as client:
        info = client.get("/api/info").json()
        assert info["title"] == "Acme"
        assert info["agents"] == ["alpha", "beta"]
        assert info["default_agent"] is None  # several agents: no default
        assert isinstance(info["version"], str) and info["version"]
        assert isinstance(info["features"], dict)
        assert all(isinstance(v, bool) for v in info["features"].values())
        assert info["features"].get("model_config") is False
        assert info["configured"] is True


def test_agents_introspection(tmp_path: Path) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return q

    agent = Agent(name="helper", instructions="Be brief.", model=ScriptedProvider([text("x")]), tools=[lookup])
    with app_client(agent, tmp_path) as client:
        listed = client.get("/api/agents").json()
        helper = next(a for a in listed if a["name"] == "helper")
        detail = client.get("/api/agents/helper").json()
        for item in (helper, detail):
            assert item["instructions"] == "Be brief."
            assert item["tools"] == ["lookup"]
            assert item["workspace"] is False and item["memory"] is False
            assert "context_window" in item and "model" in item


# --------------------------------------------------------------------------- blocking turns


def test_blocking_turn_answers_output_session_and_usage(tmp_path: Path) -> None:
    with app_client(scripted("first answer", "second answer"), tmp_path) as client:
        one = client.post("/api/chat", json={"message": "hello"})
        assert one.status_code == 200
        body = one.json()
        assert set(body) >= {"output", "session_id", "usage"}
        assert body["output"] == "first answer"
        assert isinstance(body["session_id"], str)
        assert body["usage"] and all(isinstance(v, int) for v in body["usage"].values())
        two = client.post("/api/chat", json={"message": "again", "session_id": body["session_id"]}).json()
        assert two["output"] == "second answer" and two["session_id"] == body["session_id"]
        chat = client.get(f"/api/sessions/{body['session_id']}").json()
        assert [m["content"] for m in chat["entries"] if m["role"] == "user"] == ["hello", "again"]


def test_blocking_turn_denies_gated_calls_without_a_handler(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete_all() -> str:
        """Delete everything."""
        ran.append("deleted")
        return "deleted"

    agent = scripted(call("delete_all", {}), "could not", tools=[delete_all])
    with app_client(agent, tmp_path) as client:
        answer = client.post("/api/chat", json={"message": "go"})
        assert answer.status_code == 200 and answer.json()["output"] == "could not"
        assert ran == []
        chat = client.get(f"/api/sessions/{answer.json()['session_id']}").json()
        assert [m["is_error"] for m in chat["entries"] if m["role"] == "tool"] == [True]


def test_blocking_turn_uses_the_agents_approval_handler(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def ship() -> str:
        """Ship it."""
        ran.append("shipped")
        return "shipped"

    agent = scripted(call("ship", {}), "done", tools=[ship], approval_handler=lambda *_: True)
    with app_client(agent, tmp_path) as client:
        assert client.post("/api/chat", json={"message": "go"}).json()["output"] == "done"
        assert ran == ["shipped"]


# --------------------------------------------------------------------------- chat streams


def test_stream_frames_of_a_tool_using_run(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    agent = scripted(call("add", {"a": 2, "b": 3}), "five", tools=[add])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "add"})
    names = events_of(frames)
    assert names[0] == "session"
    assert names[-1] == "done"
    session = first(frames, "session")
    assert isinstance(session["session_id"], str)
    started = first(frames, "turn_started")
    assert isinstance(started["turn"], int) and started["agent"] == "bot"
    tool_call = first(frames, "tool_call")
    assert tool_call["name"] == "add" and isinstance(tool_call["id"], str)
    assert json.loads(tool_call["arguments"]) == {"a": 2, "b": 3}  # the raw JSON string
    result = first(frames, "tool_result")
    assert result["id"] == tool_call["id"] and result["name"] == "add"
    assert result["result"] == 5 and result["is_error"] is False
    assert "".join(d["delta"] for ev, d in frames if ev == "text_delta") == "five"
    assert any(d["message"] for ev, d in frames if ev == "message_completed")
    done = first(frames, "done")
    assert done["output"] == "five"
    assert all(isinstance(v, int) for v in done["usage"].values())
    # refs and timing come before done, and name the stored user message
    assert names.index("refs") < names.index("done") and names.index("timing") < names.index("done")
    refs = first(frames, "refs")["refs"]
    timing = first(frames, "timing")
    assert isinstance(timing["finished_at"], float) and timing["duration"] >= 0
    with app_client(scripted(), tmp_path) as client:  # the same database, reopened
        chat = client.get(f"/api/sessions/{session['session_id']}").json()
    assert [m["ref"] for m in chat["entries"] if m["role"] == "user"] == refs


def test_a_failing_tool_is_a_tool_scoped_error_frame(tmp_path: Path) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    agent = scripted(call("explode", {}), "recovered", tools=[explode])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "go"})
    error = first(frames, "error")
    assert error["code"] == "tool_error" and isinstance(error["type"], str) and isinstance(error["message"], str)
    assert first(frames, "done")["output"] == "recovered"


@pytest.mark.parametrize(
    ("code", "make"),
    [
        (
            "max_turns",
            lambda t: {"agent": scripted(call("noop", {}), call("noop", {}), "x", tools=[t]), "max_turns": 1},
        ),
        (
            "budget_exceeded",
            lambda t: {"agent": scripted(call("noop", {}), "x", tools=[t]), "budget": RunBudget(max_tool_calls=0)},
        ),
    ],
)
def test_terminal_error_frames_carry_their_code(tmp_path: Path, code: str, make: Any) -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    options = make(noop)
    agent = options.pop("agent")
    with app_client(agent, tmp_path, **options) as client:
        frames = collect(client, "/api/chat/stream", {"message": "go"})
    assert events_of(frames)[-1] == "error"
    assert frames[-1][1]["code"] == code


def test_output_that_does_not_parse_is_output_invalid(tmp_path: Path) -> None:
    class Verdict(BaseModel):
        ok: bool

    agent = Agent(name="bot", model=ScriptedProvider([text("not json")]), output_type=Verdict, output_repair=False)
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "go"})
    assert frames[-1][0] == "error" and frames[-1][1]["code"] == "output_invalid"


def test_approval_required_then_approve(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        ran.append(f"refund {amount}")
        return "refunded"

    agent = scripted(call("refund", {"amount": 60}), "refund done", tools=[refund])
    with app_client(agent, tmp_path) as client:
        with client.stream("POST", "/api/chat/stream", json={"message": "refund"}) as response:
            frames = read_until(response, lambda ev, _: ev == "approval_required")
            asked = frames[-1][1]
            assert asked["name"] == "refund" and json.loads(asked["arguments"]) == {"amount": 60}
            sid = first(frames, "session")["session_id"]
            runs = client.get("/api/runs").json()
            assert runs[0]["status"] == "blocked_on_approval"
            decided = client.post(
                "/api/chat/approve", json={"session_id": sid, "call_id": asked["id"], "decision": "approve"}
            )
            assert decided.status_code == 200
            rest = rest_of(response)
        assert first(rest, "done")["output"] == "refund done"
        assert ran == ["refund 60"]
        again = client.post("/api/chat/approve", json={"session_id": sid, "call_id": asked["id"], "decision": "deny"})
        assert again.status_code == 404 and error_of(again)["code"] in ("approval_not_found", "run_not_found")


def test_deny_keeps_the_tool_from_running(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def wipe() -> str:
        """Wipe the disk."""
        ran.append("wiped")
        return "wiped"

    agent = scripted(call("wipe", {}), "did not wipe", tools=[wipe])
    with app_client(agent, tmp_path) as client:
        with client.stream("POST", "/api/chat/stream", json={"message": "wipe"}) as response:
            frames = read_until(response, lambda ev, _: ev == "approval_required")
            sid = first(frames, "session")["session_id"]
            call_id = frames[-1][1]["id"]
            wrong = client.post("/api/chat/approve", json={"session_id": sid, "call_id": "other", "decision": "deny"})
            assert_error(wrong, 404, "approval_not_found")
            client.post("/api/chat/approve", json={"session_id": sid, "call_id": call_id, "decision": "deny"})
            rest = rest_of(response)
    assert first(rest, "tool_result")["is_error"] is True
    assert first(rest, "done")["output"] == "did not wipe"
    assert ran == []


def test_a_second_stream_attaches_to_the_live_run_and_injects(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold, "answered both"), tmp_path) as client:
        ctx, response, frames = start_held_stream(client, hold, {"message": "first"})
        try:
            sid = first(frames, "session")["session_id"]
            with client.stream("POST", "/api/chat/stream", json={"message": "also this", "session_id": sid}) as second:
                assert second.status_code == 200
                assert len(client.get("/api/runs").json()) == 1  # no second run
                hold.release.set()
                joined = rest_of(second)
            rest = rest_of(response)
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)
    injected = first(rest, "user_injected")
    assert injected["content"] == "also this" and isinstance(injected["turn"], int)
    assert first(joined, "done")["output"] == first(rest, "done")["output"] == "answered both"


def test_reconnect_gets_a_snapshot_then_the_live_tail(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold, "after the wait"), tmp_path) as client:
        ctx, _response, frames = start_held_stream(client, hold, {"message": "long job"})
        ctx.__exit__(None, None, None)  # the tab goes away; the run does not
        sid = first(frames, "session")["session_id"]
        assert [r["session_id"] for r in client.get("/api/runs").json()] == [sid]
        with client.stream("POST", "/api/chat/reconnect", params={"session_id": sid}) as response:
            head = read_until(response, lambda ev, _: ev == "snapshot")
            snapshot = head[-1][1]
            assert snapshot["session_id"] == sid and isinstance(snapshot["status"], str)
            assert [m["content"] for m in snapshot["entries"] if m["role"] == "user"] == ["long job"]
            hold.release.set()
            tail = rest_of(response)
    assert first(tail, "done")["output"] == "after the wait"


def test_reconnect_replays_a_pending_approval(tmp_path: Path) -> None:
    @tool(needs_approval=True)
    def send_mail() -> str:
        """Send the mail."""
        return "sent"

    agent = scripted(call("send_mail", {}), "mail sent", tools=[send_mail])
    with app_client(agent, tmp_path) as client:
        with client.stream("POST", "/api/chat/stream", json={"message": "mail"}) as response:
            frames = read_until(response, lambda ev, _: ev == "approval_required")
        sid = first(frames, "session")["session_id"]
        with client.stream("POST", "/api/chat/reconnect", params={"session_id": sid}) as response:
            replay = read_until(response, lambda ev, _: ev == "approval_required")
            call_id = replay[-1][1]["id"]
            assert replay[-1][1]["name"] == "send_mail"
            assert "snapshot" in events_of(replay)
            client.post("/api/chat/approve", json={"session_id": sid, "call_id": call_id, "decision": "approve"})
            tail = rest_of(response)
    assert first(tail, "done")["output"] == "mail sent"


def test_cancel_stops_the_live_run_and_keeps_completed_turns(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(scripted("earlier", call("wait_here", {}), "never", tools=[hold.tool]), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "first"}).json()["session_id"]
        ctx, response, _frames = start_held_stream(client, hold, {"message": "second", "session_id": sid})
        try:
            assert client.post("/api/chat/cancel", params={"session_id": sid}).status_code == 200
            rest = rest_of(response)  # the stream ends
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)
        assert "never" not in json.dumps(rest)
        assert client.get("/api/runs").json() == []
        chat = client.get(f"/api/sessions/{sid}").json()
        assert [m["content"] for m in chat["entries"] if m["role"] == "user"] == ["first", "second"]
        assert "earlier" in [m["content"] for m in chat["entries"] if m["role"] == "assistant"]


def test_inject_and_uninject(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold, "done"), tmp_path) as client:
        ctx, response, frames = start_held_stream(client, hold, {"message": "go"})
        try:
            sid = first(frames, "session")["session_id"]
            kept = client.post("/api/chat/inject", json={"session_id": sid, "message": "keep me"})
            assert kept.status_code == 200
            dropped = client.post("/api/chat/inject", json={"session_id": sid, "message": "drop me"}).json()
            assert isinstance(dropped["id"], int)
            undo = client.post("/api/chat/uninject", json={"session_id": sid, "id": dropped["id"]})
            assert undo.status_code == 200
            hold.release.set()
            rest = rest_of(response)
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)
        assert [d["content"] for ev, d in rest if ev == "user_injected"] == ["keep me"]
        chat = client.get(f"/api/sessions/{sid}").json()
        users = [m["content"] for m in chat["entries"] if m["role"] == "user"]
        assert "keep me" in users and "drop me" not in users


def test_todo_frames_and_the_todo_route(tmp_path: Path) -> None:
    todos = [{"content": "Write tests", "status": "in_progress"}, {"content": "Ship", "status": "pending"}]
    agent = Agent(name="bot", model=ScriptedProvider([call("todo_write", {"todos": todos}), text("planned")]))
    agent.plugins.append(Todo())
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "plan"})
        update = first(frames, "todo")
        assert update["name"] == "todo_write" and isinstance(update["call_id"], str)
        assert [t["content"] for t in update["todos"]] == ["Write tests", "Ship"]
        sid = first(frames, "session")["session_id"]
        listed = client.get(f"/api/sessions/{sid}/todos").json()["todos"]
    assert [(t["content"], t["status"]) for t in listed] == [("Write tests", "in_progress"), ("Ship", "pending")]
    assert all("active_form" in t for t in listed)


# --------------------------------------------------------------------------- sessions


def test_sessions_list_search_paging_and_pins(tmp_path: Path) -> None:
    with app_client(scripted("a", "b", "c"), tmp_path) as client:
        ids = [client.post("/api/chat", json={"message": m}).json()["session_id"] for m in ("apples", "pears", "plums")]
        listed = client.get("/api/sessions").json()
        assert {s["id"] for s in listed} == set(ids)
        item = listed[0]
        for key in ("id", "title", "agent", "created_at", "updated_at", "pinned", "parent_id", "origin_kind"):
            assert key in item, key
        assert item["last_run_status"] == "completed"
        page_one = client.get("/api/sessions", params={"limit": 2}).json()
        page_two = client.get("/api/sessions", params={"limit": 2, "offset": 2}).json()
        assert len(page_one) == 2 and len(page_two) == 1
        assert {s["id"] for s in page_one + page_two} == set(ids)
        found = client.get("/api/sessions", params={"q": "pears"}).json()
        assert [s["id"] for s in found] == [ids[1]]
        pinned = client.patch(f"/api/sessions/{ids[0]}", json={"pinned": True})
        assert pinned.status_code == 200 and pinned.json()["pinned"] is True
        assert client.get("/api/sessions").json()[0]["id"] == ids[0]
        renamed = client.patch(f"/api/sessions/{ids[2]}", json={"title": "Plum talk"}).json()
        assert renamed["title"] == "Plum talk"
        assert client.get(f"/api/sessions/{ids[2]}").json()["title"] == "Plum talk"
        assert client.delete("/api/sessions").status_code == 200
        assert client.get("/api/sessions").json() == []


def test_session_detail_messages_refs_and_duration(tmp_path: Path) -> None:
    with app_client(scripted("one", "two"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "q1"}).json()["session_id"]
        client.post("/api/chat", json={"message": "q2", "session_id": sid})
        chat = client.get(f"/api/sessions/{sid}").json()
        history = {r["run_id"] for r in client.get("/api/runs/history", params={"session_id": sid}).json()["runs"]}
    assert chat["id"] == sid and isinstance(chat["created_at"], float) and isinstance(chat["updated_at"], float)
    assert chat["origin"] is None
    users = [m for m in chat["entries"] if m["role"] == "user"]
    answers = [m for m in chat["entries"] if m["role"] == "assistant"]
    assert [m["content"] for m in users] == ["q1", "q2"]
    for m in users:
        run_id, _, n = m["ref"].rpartition(":")
        assert run_id in history and n == "0"
    assert all(isinstance(m["duration"], (int, float)) for m in answers)
    assert all(isinstance(m["timestamp"], float) for m in chat["entries"])
    for key in ("role", "content", "ref", "reasoning", "tool_call_id", "name", "tool_calls", "is_error", "images"):
        assert key in users[0], key


def test_a_live_runs_user_message_has_no_ref_yet(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold), tmp_path) as client:
        ctx, _response, frames = start_held_stream(client, hold, {"message": "pending"})
        try:
            sid = first(frames, "session")["session_id"]
            chat = client.get(f"/api/sessions/{sid}").json()
            assert [m["ref"] for m in chat["entries"] if m["role"] == "user"] in ([None], [])
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)


def test_rewind_by_ref_and_by_user_turn(tmp_path: Path) -> None:
    with app_client(scripted("a1", "a2", "a3", "a4"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "m1"}).json()["session_id"]
        for m in ("m2", "m3"):
            client.post("/api/chat", json={"message": m, "session_id": sid})
        entries = client.get(f"/api/sessions/{sid}").json()["entries"]
        ref3 = [m["ref"] for m in entries if m["role"] == "user"][2]
        assert client.post(f"/api/sessions/{sid}/rewind", json={"ref": ref3}).status_code == 200
        users = [m["content"] for m in client.get(f"/api/sessions/{sid}").json()["entries"] if m["role"] == "user"]
        assert users == ["m1", "m2"]
        assert_error(client.post(f"/api/sessions/{sid}/rewind", json={"ref": ref3}), 404, "turn_not_found")
        assert client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 1}).status_code == 200
        users = [m["content"] for m in client.get(f"/api/sessions/{sid}").json()["entries"] if m["role"] == "user"]
        assert users == ["m1"]
        client.post("/api/chat", json={"message": "m4", "session_id": sid})
        entries = client.get(f"/api/sessions/{sid}").json()["entries"]
        assert [m["content"] for m in entries] == ["m1", "a1", "m4", "a4"]


def test_rewind_while_live_is_refused(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold), tmp_path) as client:
        ctx, _response, frames = start_held_stream(client, hold, {"message": "busy"})
        try:
            sid = first(frames, "session")["session_id"]
            refused = client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0})
            assert refused.status_code == 409
            assert_error(client.post(f"/api/sessions/{sid}/fork", json={}), 409, "run_active")
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)


def test_fork_whole_and_before_a_message(tmp_path: Path) -> None:
    with app_client(scripted("a1", "a2", "a3"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "m1"}).json()["session_id"]
        client.post("/api/chat", json={"message": "m2", "session_id": sid})
        client.patch(f"/api/sessions/{sid}", json={"title": "Source chat"})
        whole = client.post(f"/api/sessions/{sid}/fork", json={})
        assert whole.status_code == 200
        copy_id = whole.json()["session_id"]
        copy = client.get(f"/api/sessions/{copy_id}").json()
        assert [m["content"] for m in copy["entries"]] == ["m1", "a1", "m2", "a2"]
        origin = copy["origin"]
        assert origin["kind"] == "fork" and origin["session_id"] == sid
        assert origin["title"] == "Source chat" and origin["exists"] is True and origin["ref"] is None
        listed = {s["id"]: s for s in client.get("/api/sessions").json()}
        assert listed[copy_id]["origin_kind"] == "fork" and listed[sid]["origin_kind"] is None
        ref2 = [m["ref"] for m in client.get(f"/api/sessions/{sid}").json()["entries"] if m["role"] == "user"][1]
        part_id = client.post(f"/api/sessions/{sid}/fork", json={"ref": ref2}).json()["session_id"]
        part = client.get(f"/api/sessions/{part_id}").json()
        assert [m["content"] for m in part["entries"]] == ["m1", "a1"]
        assert part["origin"]["ref"] == ref2
        # independent: deleting the source leaves both copies, which say it is gone
        assert client.delete(f"/api/sessions/{sid}").status_code == 200
        assert client.get(f"/api/sessions/{copy_id}").json()["origin"]["exists"] is False
        client.post("/api/chat", json={"message": "m3", "session_id": copy_id})
        assert len(client.get(f"/api/sessions/{copy_id}").json()["entries"]) == 6


@pytest.mark.parametrize("fmt", ["md", "json", "txt"])
def test_export(tmp_path: Path, fmt: str) -> None:
    with app_client(scripted("the answer"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "the question"}).json()["session_id"]
        exported = client.get(f"/api/sessions/{sid}/export", params={"format": fmt})
    assert exported.status_code == 200
    assert "the question" in exported.text and "the answer" in exported.text
    if fmt == "json":
        assert isinstance(exported.json(), dict)


def test_ui_data_is_served_for_its_chat_only(tmp_path: Path) -> None:
    rows = [[i, i * i] for i in range(50)]

    @tool
    async def squares() -> str:
        """Squares as a table."""
        ref = await put_ui_data({"columns": ["n", "n²"], "rows": rows})
        return ui_result("table", {"columns": ["n", "n²"], "rows": rows[:3], "row_count": 50}, data=ref)

    agent = scripted(call("squares", {}), "here", "other", tools=[squares])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "table"})
        sid = first(frames, "session")["session_id"]
        envelope = json.loads(first(frames, "tool_result")["result"])["lovia_ui"]
        assert envelope["kind"] == "table" and envelope["props"]["row_count"] == 50
        ref = envelope["data"]
        assert isinstance(ref, str) and ref
        full = client.get(f"/api/sessions/{sid}/ui-data/{ref}")
        assert full.status_code == 200 and full.json() == {"columns": ["n", "n²"], "rows": rows}
        other = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        assert_error(client.get(f"/api/sessions/{other}/ui-data/{ref}"), 404, "ui_data_not_found")
        client.delete(f"/api/sessions/{sid}")
        assert client.get(f"/api/sessions/{sid}/ui-data/{ref}").status_code == 404


def test_tool_images_of_an_unknown_call_are_image_not_found(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        assert_error(client.get(f"/api/sessions/{sid}/tool-images/call_x/0"), 404, "image_not_found")


def test_followups_are_empty_when_off(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        answer = client.post(f"/api/sessions/{sid}/followups")
    assert answer.status_code == 200 and answer.json() == {"followups": []}


# --------------------------------------------------------------------------- runs and events


def test_live_runs_list(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold), tmp_path) as client:
        ctx, _response, frames = start_held_stream(client, hold, {"message": "busy"})
        try:
            sid = first(frames, "session")["session_id"]
            runs = client.get("/api/runs").json()
            assert len(runs) == 1
            run = runs[0]
            assert run["session_id"] == sid and run["agent"] == "bot"
            assert run["status"] == "running" and run["source"] == "user"
            assert isinstance(run["run_id"], str) and isinstance(run["turns"], int)
            assert isinstance(run["started_at"], float)
            from lovia.web.schemas import RunInfo

            RunInfo.model_validate(run)
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)
        wait_until(lambda: client.get("/api/runs").json() == [])


def test_run_history_records_and_filters(tmp_path: Path) -> None:
    with app_client(scripted("a", "b", "c"), tmp_path) as client:
        first_chat = client.post("/api/chat", json={"message": "1"}).json()["session_id"]
        client.post("/api/chat", json={"message": "2", "session_id": first_chat})
        mark = time.time()
        time.sleep(0.05)
        other = client.post("/api/chat", json={"message": "3"}).json()["session_id"]
        runs = client.get("/api/runs/history").json()["runs"]
        assert len(runs) == 3
        record = runs[0]
        assert record["session_id"] == other  # newest first
        assert record["agent"] == "bot" and record["source"] == "user" and record["status"] == "completed"
        assert record["error"] is None
        assert isinstance(record["started_at"], float) and isinstance(record["finished_at"], float)
        assert all(isinstance(v, int) for v in record["usage"].values())
        mine = client.get("/api/runs/history", params={"session_id": first_chat}).json()["runs"]
        assert len(mine) == 2 and {r["session_id"] for r in mine} == {first_chat}
        assert len(client.get("/api/runs/history", params={"source": "user"}).json()["runs"]) == 3
        assert client.get("/api/runs/history", params={"source": "schedule:none"}).json()["runs"] == []
        recent = client.get("/api/runs/history", params={"since": mark}).json()["runs"]
        assert [r["session_id"] for r in recent] == [other]
        paged = client.get("/api/runs/history", params={"limit": 1, "offset": 1}).json()["runs"]
        assert [r["run_id"] for r in paged] == [runs[1]["run_id"]]


def test_failed_runs_keep_their_error_in_history(tmp_path: Path) -> None:
    with app_client(Agent(name="bot", model=RejectingProvider()), tmp_path) as client:
        collect(client, "/api/chat/stream", {"message": "hi"})
        record = client.get("/api/runs/history").json()["runs"][0]
    assert record["status"] == "failed" and "invalid api key" in record["error"]


def test_lifecycle_events(tmp_path: Path) -> None:
    with app_client(scripted("hello back"), tmp_path) as client:
        seen: list[tuple[str, Any]] = []
        subscribed = threading.Event()

        def listen() -> None:
            with client.stream("GET", "/api/events") as response:
                subscribed.set()
                for ev, data in parse_sse(response.iter_lines()):
                    seen.append((ev, data))
                    if ev == "run_finished":
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert subscribed.wait(10)
        time.sleep(0.2)
        sid = client.post("/api/chat", json={"message": "hello"}).json()["session_id"]
        listener.join(15)
    created = first(seen, "session_created")
    assert created["session_id"] == sid and "agent" in created and "title" in created
    started = first(seen, "run_started")
    assert started["session_id"] == sid and started["agent"] == "bot" and started["source"] == "user"
    finished = first(seen, "run_finished")
    assert finished["session_id"] == sid and finished["run_id"] == started["run_id"]
    assert finished["status"] == "completed" and finished["error"] is None and finished["source"] == "user"


# --------------------------------------------------------------------------- schedules


def test_schedule_crud_fire_now_and_history(tmp_path: Path) -> None:
    with app_client(scripted("fired answer"), tmp_path) as client:
        created = client.post(
            "/api/schedules", json={"input": "report", "trigger_kind": "every", "trigger_expr": "3600"}
        )
        assert created.status_code in (200, 201)
        row = created.json()
        for key in ("id", "agent", "input", "session_id", "trigger_kind", "trigger_expr", "next_fire", "active"):
            assert key in row, key
        for key in ("last_session_id", "last_status", "last_error", "created_at", "updated_at", "fire_count"):
            assert key in row, key
        assert row["active"] is True and row["trigger_kind"] == "every" and row["input"] == "report"
        assert row["next_fire"] > time.time() + 3000
        listed = client.get("/api/schedules").json()
        items = listed if isinstance(listed, list) else listed["schedules"]
        assert [s["id"] for s in items] == [row["id"]]
        assert client.get(f"/api/schedules/{row['id']}").json()["input"] == "report"
        paused = client.patch(f"/api/schedules/{row['id']}", json={"active": False}).json()
        assert paused["active"] is False
        fired = client.post(f"/api/schedules/{row['id']}/run")
        assert fired.status_code == 200
        records = wait_until(
            lambda: [r for r in client.get(f"/api/schedules/{row['id']}/runs").json() if r.get("status") == "completed"]
        )
        record = records[0]
        assert record["source"] == f"schedule:{row['id']}"
        chat = client.get(f"/api/sessions/{record['session_id']}").json()
        assert [m["content"] for m in chat["entries"]] == ["report", "fired answer"]
        assert client.delete(f"/api/schedules/{row['id']}").status_code == 200
        assert_error(client.get(f"/api/schedules/{row['id']}"), 404, "schedule_not_found")


def test_bad_triggers_are_invalid_requests(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        for kind, expr in (("cron", "61 * * * *"), ("every", "0"), ("at", "not a time")):
            refused = client.post("/api/schedules", json={"input": "x", "trigger_kind": kind, "trigger_expr": expr})
            assert refused.status_code in (400, 422), (kind, expr, refused.text)
        assert client.get("/api/schedules").json() in ([], {"schedules": []})


def test_deleting_a_chat_deletes_its_schedules(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        sched = client.post(
            "/api/schedules",
            json={"input": "again", "trigger_kind": "every", "trigger_expr": "600", "session_id": sid},
        ).json()
        assert sched["session_id"] == sid
        client.delete(f"/api/sessions/{sid}")
        assert_error(client.get(f"/api/schedules/{sched['id']}"), 404, "schedule_not_found")


def test_schedule_fire_at_the_run_cap_is_schedule_not_fired(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold), tmp_path, max_background_runs=1) as client:
        sched = client.post("/api/schedules", json={"input": "x", "trigger_kind": "every", "trigger_expr": "600"})
        ctx, _response, _frames = start_held_stream(client, hold, {"message": "busy"})
        try:
            assert_error(client.post(f"/api/schedules/{sched.json()['id']}/run"), 409, "schedule_not_fired")
        finally:
            hold.release.set()
            ctx.__exit__(None, None, None)


# --------------------------------------------------------------------------- workspace


def make_workspace(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "notes.md").write_text("# Notes\nline two\n")
    (root / "secret.key").write_text("hunter2")
    (root / ".env").write_text("TOKEN=1")
    for noise in ("__pycache__", "node_modules", "venv"):
        (root / noise).mkdir()
        (root / noise / "x.txt").write_text("noise")
    (root / "src" / "main.cpython-312.pyc").write_bytes(b"\x00\x01")


def test_workspace_routes_read_and_hide(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    make_workspace(root)
    agent = scripted("x", workspace=Workspace.local(str(root), mode="coding", denied_paths=("*.key",)))
    with app_client(agent, tmp_path) as client:
        assert client.get("/api/workspace").status_code == 200
        names = {e["name"] for e in client.get("/api/workspace/files").json()}
        assert {"src", "notes.md"} <= names
        assert not names & {"__pycache__", "node_modules", "venv", ".env"}
        src = {e["name"] for e in client.get("/api/workspace/files", params={"path": "src"}).json()}
        assert src == {"main.py"}
        file = client.get("/api/workspace/file", params={"path": "notes.md"})
        assert file.status_code == 200 and "line two" in file.json()["content"]
        raw = client.get("/api/workspace/raw", params={"path": "src/main.py", "download": 1})  # not an image
        assert raw.status_code == 200 and raw.content == b"print('hi')\n"
        assert client.get("/api/workspace/recent").status_code == 200
        assert_error(client.get("/api/workspace/file", params={"path": "secret.key"}), 403, "path_denied")
        assert_error(client.get("/api/workspace/file", params={"path": "../outside.txt"}), 403, "path_denied")
        assert_error(client.get("/api/workspace/file", params={"path": "missing.md"}), 404, "file_not_found")


def test_workspace_upload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setenv("LOVIA_MAX_UPLOAD_MB", "0.01")
    agent = scripted("x", workspace=Workspace.local(str(root)))
    with app_client(agent, tmp_path) as client:
        saved = client.post(
            "/api/workspace/upload", params={"agent": "bot"}, files={"file": ("data.csv", b"a,b\n1,2\n", "text/csv")}
        )
        assert saved.status_code == 200, saved.text
        info = saved.json()
        assert info["path"] == "uploads/data.csv" and info["name"] == "data.csv"
        assert info["kind"] == "file" and info["mime"].startswith("text/csv") and info["size"] == 8
        assert (root / "uploads" / "data.csv").read_bytes() == b"a,b\n1,2\n"
        refused = client.post("/api/workspace/upload", files={"file": ("tool.exe", b"MZ", "application/octet-stream")})
        assert_error(refused, 415, "unsupported_file_type")
        big = client.post("/api/workspace/upload", files={"file": ("big.txt", b"x" * 20_000, "text/plain")})
        assert_error(big, 413, "file_too_large")
        assert not (root / "uploads" / "big.txt").exists()


def test_a_chat_attachment_names_an_uploaded_path(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    agent = scripted("got it", workspace=Workspace.local(str(root)))
    with app_client(agent, tmp_path) as client:
        up = client.post("/api/workspace/upload", files={"file": ("report.txt", b"quarterly numbers", "text/plain")})
        info = up.json()
        attachment = {"path": info["path"], "mime": info["mime"], "kind": info["kind"], "name": info["name"]}
        answer = client.post("/api/chat", json={"message": "read this", "attachments": [attachment]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["output"] == "got it"
        chat = client.get(f"/api/sessions/{answer.json()['session_id']}").json()
        assert "uploads/report.txt" in json.dumps(chat["entries"][0]["content"])


# --------------------------------------------------------------------------- memory


def test_memory_notes_read_and_replace(tmp_path: Path) -> None:
    from lovia import Memory

    agent = scripted("x")
    agent.plugins.append(Memory(tmp_path / "memory", index=None, auto_curate=False))
    with app_client(agent, tmp_path) as client:
        notes = client.get("/api/memory", params={"agent": "bot"}).json()
        assert set(notes) >= {"content", "used", "budget", "dreamed_at"}
        assert isinstance(notes["used"], int) and isinstance(notes["budget"], int)
        put = client.put("/api/memory", params={"agent": "bot"}, json={"content": "- likes tea\n- lives in Oslo\n"})
        assert put.status_code == 200
        after = client.get("/api/memory").json()
        assert "likes tea" in after["content"] and "lives in Oslo" in after["content"]
        assert after["used"] > notes["used"]
        assert client.get("/api/agents/bot").json()["memory"] is True


# --------------------------------------------------------------------------- client context


def test_context_reaches_run_deps_and_is_capped(tmp_path: Path) -> None:
    seen: list[RunTrigger] = []

    def run_deps(trigger: RunTrigger) -> str:
        seen.append(trigger)
        return "deps"

    with app_client(scripted("a", "b"), tmp_path, run_deps=run_deps) as client:
        ok = client.post("/api/chat", json={"message": "hi", "context": {"kb": "legal"}})
        assert ok.status_code == 200
        assert seen[-1].client_context == {"kb": "legal"} and seen[-1].source == "user"
        huge = {"blob": "x" * (65 * 1024)}
        refused = client.post("/api/chat", json={"message": "hi", "context": huge})
        assert 400 <= refused.status_code < 500
        assert len(seen) == 1
        schedule = client.post(
            "/api/schedules",
            json={"input": "x", "trigger_kind": "every", "trigger_expr": "600", "context": {"kb": "hr"}},
        )
        assert schedule.status_code in (200, 201)
        assert schedule.json()["id"]


def test_tool_images_are_stubbed_and_served(tmp_path: Path) -> None:
    import base64

    from lovia import ImagePart, TextPart

    png = b"\x89PNG\r\n\x1a\n" + bytes(24)

    @tool
    def screenshot() -> list[Any]:
        """Take a screenshot."""
        return [TextPart("the screen"), ImagePart(data=base64.b64encode(png).decode(), mime_type="image/png")]

    agent = scripted(call("screenshot", {}), "looks fine", tools=[screenshot])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "look"})
        result = first(frames, "tool_result")
        assert result["images"] == [{"index": 0, "mime_type": "image/png"}]  # counted among the images
        sid = first(frames, "session")["session_id"]
        served = client.get(f"/api/sessions/{sid}/tool-images/{result['id']}/0")
        assert served.status_code == 200 and served.content == png
        assert served.headers["content-type"] == "image/png"
        stored = [m for m in client.get(f"/api/sessions/{sid}").json()["entries"] if m["role"] == "tool"]
        assert stored[0]["images"] == [{"index": 0, "mime_type": "image/png"}]
        assert_error(client.get(f"/api/sessions/{sid}/tool-images/{result['id']}/1"), 404, "image_not_found")


def test_reasoning_streams_as_reasoning_deltas(tmp_path: Path) -> None:
    with app_client(scripted(text("the answer", reasoning="let me think")), tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "think"})
    assert "".join(d["delta"] for ev, d in frames if ev == "reasoning_delta") == "let me think"
    assert "".join(d["delta"] for ev, d in frames if ev == "text_delta") == "the answer"


def test_a_message_sent_during_a_blocking_turn_joins_it(tmp_path: Path) -> None:
    hold = Hold()
    with app_client(hold_agent(hold, "the last answer"), tmp_path) as client:
        result: dict[str, Any] = {}

        def blocking() -> None:
            result["response"] = client.post("/api/chat", json={"message": "start", "session_id": "chat_joined"})

        worker = threading.Thread(target=blocking)
        worker.start()
        assert hold.entered.wait(10)
        with client.stream("POST", "/api/chat/stream", json={"message": "and this", "session_id": "chat_joined"}) as s:
            assert s.status_code == 200
            hold.release.set()
            joined = rest_of(s)
        worker.join(20)
        assert result["response"].status_code == 200
        assert result["response"].json()["output"] == "the last answer"
        assert first(joined, "user_injected")["content"] == "and this"
        users = [m["content"] for m in client.get("/api/sessions/chat_joined").json()["entries"] if m["role"] == "user"]
        assert users == ["start", "and this"]


def test_answers_validate_against_the_published_models(tmp_path: Path) -> None:
    from lovia import Memory, Subagents
    from lovia.web import schemas

    root = tmp_path / "ws"
    make_workspace(root)
    helper = Agent(name="helper", model=ScriptedProvider([text("42")]))
    lead = Agent(
        name="bot",
        model=ScriptedProvider([call("spawn_subagent", {"prompt": "sums"}), text("started"), text("reported")]),
        plugins=[Subagents(agents=[helper]), Memory(tmp_path / "memory", index=None, auto_curate=False)],
        workspace=Workspace.local(str(root)),
    )
    with app_client(lead, tmp_path) as client:
        schemas.ServerInfo.model_validate(client.get("/api/info").json())
        for item in client.get("/api/agents").json():
            schemas.AgentInfo.model_validate(item)
        schemas.AgentInfo.model_validate(client.get("/api/agents/bot").json())
        answer = schemas.ChatResponse.model_validate(client.post("/api/chat", json={"message": "delegate"}).json())
        sid = answer.session_id
        wait_until(lambda: client.get(f"/api/sessions/{sid}/children").json()["children"])
        wait_until(lambda: len(client.get("/api/runs/history").json()["runs"]) >= 3, timeout=20)
        wait_until(lambda: client.get("/api/runs").json() == [], timeout=20)
        fork = schemas.ForkResponse.model_validate(client.post(f"/api/sessions/{sid}/fork", json={}).json())
        for item in client.get("/api/sessions").json():
            schemas.ChatSessionInfo.model_validate(item)
        for chat_id in [s["id"] for s in client.get("/api/sessions").json()] + [fork.session_id]:
            detail = schemas.SessionDetail.model_validate(client.get(f"/api/sessions/{chat_id}").json())
            assert detail.id == chat_id
        for record in client.get("/api/runs/history").json()["runs"]:
            schemas.RunRecordInfo.model_validate(record)
        schemas.TodosResponse.model_validate(client.get(f"/api/sessions/{sid}/todos").json())
        schemas.FollowupsResponse.model_validate(client.post(f"/api/sessions/{sid}/followups").json())
        made = client.post("/api/schedules", json={"input": "x", "trigger_kind": "every", "trigger_expr": "60"}).json()
        schemas.ScheduleInfo.model_validate(made)
        for record in client.get(f"/api/schedules/{made['id']}/runs").json():
            schemas.RunRecordInfo.model_validate(record)
        schemas.MemoryNotes.model_validate(client.get("/api/memory").json())
        schemas.MemoryNotes.model_validate(client.put("/api/memory", json={"content": "- tea\n"}).json())
        schemas.WorkspaceInfo.model_validate(client.get("/api/workspace").json())
        for entry in client.get("/api/workspace/files").json():
            schemas.WorkspaceEntry.model_validate(entry)
        schemas.WorkspaceFile.model_validate(client.get("/api/workspace/file", params={"path": "notes.md"}).json())
        uploaded = client.post("/api/workspace/upload", files={"file": ("a.txt", b"hi", "text/plain")}).json()
        schemas.UploadedFile.model_validate(uploaded)
