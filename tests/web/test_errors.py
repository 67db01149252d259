"""Every API error has the documented body, over real HTTP: ``{"detail": {code, message, hint}}``,
or FastAPI's validation list for a 422 from request validation."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.exceptions import StoreError, UserError
from lovia.web import ChatStore, create_app
from lovia.web.store import ChatMeta

from .helpers import Gate, ThreadServer, scripted_agent, sse, wait_for


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error's ``detail`` after checking status, code and the exact shape."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail"} and set(body["detail"]) == {"code", "message", "hint"}, body
    detail: dict[str, Any] = body["detail"]
    assert detail["code"] == code and detail["message"], detail
    assert "Traceback" not in response.text
    return detail


def test_validation_errors_are_fastapi_lists_without_the_input(server: ThreadServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        bad_body = http.post("/api/chat/approve", json={"session_id": "s", "call_id": "c", "decision": "maybe"})
        assert bad_body.status_code == 422
        assert [(e["loc"], e["type"]) for e in bad_body.json()["detail"]] == [(["body", "decision"], "literal_error")]
        assert "maybe" not in bad_body.text  # the rejected value is not echoed
        bad_query = http.get("/api/sessions", params={"limit": "ten"})
        assert bad_query.status_code == 422 and bad_query.json()["detail"][0]["loc"] == ["query", "limit"]
        not_json = http.post("/api/sessions", content=b"{oops", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 422 and not_json.json()["detail"][0]["type"] == "json_invalid"
        # A route's own refusal of an input it parsed is the usual body, code invalid_request.
        assert error(http.post("/api/chat", json={"message": "  "}), 422, "invalid_request")["hint"]
        assert error(http.get("/api/sessions/x/export", params={"format": "pdf"}), 404, "session_not_found")


def test_unknown_chats_agents_and_routes(server: ThreadServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for method, path, body in [
            ("PATCH", "/api/sessions/nope", {"title": "x"}),
            ("DELETE", "/api/sessions/nope", None),
            ("POST", "/api/sessions/nope/rewind", {"user_turn": 0}),
            ("POST", "/api/chat/reconnect?session_id=nope", None),
            ("GET", "/api/sessions/nope/todos", None),
        ]:
            detail = error(http.request(method, path, json=body), 404, "session_not_found")
            assert "GET /api/sessions" in (detail["hint"] or ""), (method, path)
        error(http.post("/api/chat", json={"message": "hi", "agent": "ghost"}), 404, "agent_not_found")
        assert http.get("/api/sessions").json() == []  # the refused message made no chat
        error(http.get("/api/agents/ghost"), 404, "agent_not_found")
        assert http.post("/api/chat/inject", json={"session_id": "nope", "message": "x"}).json() == {"accepted": False}
        error(http.get("/api/no-such-route"), 404, "not_found")
        error(http.put("/api/sessions"), 405, "method_not_allowed")


def test_a_live_run_is_a_conflict(server: ThreadServer, gate: Gate) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call")
    sid = first.of("session")[0]["session_id"]
    wait_for(lambda: gate.runs.get("slow"))
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert error(http.post("/api/chat", json={"message": "x", "session_id": sid}), 409, "run_active")["hint"]
        error(http.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0}), 409, "run_active")
        error(http.post(f"/api/sessions/{sid}/fork", json={}), 409, "run_active")
        gate.release.set()
        wait_for(lambda: not http.get(f"/api/sessions/{sid}").json()["live"])


def test_auth_and_cross_origin_refusals(tmp_path: Path) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "w.db"), token="s3cret")
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            r = http.get("/api/sessions", headers=headers)
            assert "token" in error(r, 401, "server_token")["hint"]
            assert r.headers["www-authenticate"] == "Bearer"
        ok = {"Authorization": "Bearer s3cret"}
        assert http.get("/api/sessions", headers=ok).status_code == 200
        evil = http.post("/api/sessions", json={}, headers={**ok, "Origin": "http://attacker.test"})
        assert "attacker.test" in error(evil, 403, "cross_origin")["message"]
        error(http.get("/api/sessions", headers={"Host": "attacker.test"}), 421, "host_not_allowed")


def test_a_json_body_over_the_limit_is_413_whether_declared_or_streamed(server: ThreadServer) -> None:
    from lovia.web.params import MAX_JSON_BODY

    big = b'{"title": "' + b"x" * MAX_JSON_BODY + b'"}'
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        declared = http.post("/api/sessions", content=big, headers=json_type)
        assert "MiB" in error(declared, 413, "payload_too_large")["message"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is found while reading
            for start in range(0, len(big), 1 << 16):
                yield big[start : start + (1 << 16)]

        streamed = http.post("/api/sessions", content=chunks(), headers=json_type)
        error(streamed, 413, "payload_too_large")
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/api/sessions").json() == []
        assert http.post("/api/sessions", json={"title": "ok"}).status_code == 200


class BrokenStore(ChatStore):
    """A chat store whose listing fails in one of three ways, picked by the search text."""

    async def list(self, *, query: str | None = None, limit: int = 100, offset: int = 0) -> list[ChatMeta]:
        if query == "crash":
            raise RuntimeError("secret-internal-detail at /srv/private/path")
        if query == "store":
            raise StoreError("the chat index is unreadable", hint="restore chat.db from a backup")
        if query == "user":
            raise UserError("that search is not allowed", hint="search for something else")
        return await super().list(query=query, limit=limit, offset=offset)


def test_unexpected_errors_are_500_internal_with_no_traceback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = BrokenStore.sqlite(str(tmp_path / "b.db"))
    assert isinstance(store, BrokenStore)
    app = create_app(scripted_agent(), store=store)
    caplog.set_level(logging.ERROR, logger="lovia.web")
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        crash = http.get("/api/sessions", params={"q": "crash"})
        detail = error(crash, 500, "internal")
        assert "secret-internal-detail" not in crash.text and "RuntimeError" not in crash.text
        error_id = re.search(r"error id (\w+)", detail["message"])
        assert error_id is not None and detail["hint"]
        logged = [r for r in caplog.records if error_id.group(1) in r.getMessage()]
        assert logged and logged[0].exc_info is not None  # the traceback is in the server log only
        stored = error(http.get("/api/sessions", params={"q": "store"}), 500, "internal")
        assert stored == {
            "code": "internal",
            "message": "the chat index is unreadable",
            "hint": "restore chat.db from a backup",
        }
        user = error(http.get("/api/sessions", params={"q": "user"}), 400, "invalid_request")
        assert user["hint"] == "search for something else"
        assert http.get("/api/sessions").status_code == 200  # the server is fine afterwards


def test_a_failed_blocking_turn_is_500_run_failed_with_the_runs_error(tmp_path: Path) -> None:
    from lovia import Agent
    from lovia.exceptions import ProviderError
    from lovia.testing import ScriptedProvider, fail

    broken = ProviderError("the model server fell over", retryable=False, hint="check the model server's log")
    agent = Agent(name="down", model=ScriptedProvider([fail(broken)]))
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "f.db"))) as srv:
        r = httpx.post(f"{srv.url}/api/chat", json={"message": "hello"}, timeout=20)
        detail = error(r, 500, "run_failed")
        assert "fell over" in detail["message"] and detail["hint"] == "check the model server's log"
