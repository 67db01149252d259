"""``build_api_router`` mounted in a bare FastAPI app under a prefix, driven over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import Depends, FastAPI

from lovia.exceptions import UserError
from lovia.web import ChatStore, create_app
from lovia.web.api import RouterDeps, build_api_router
from lovia.web.auth import HostOriginGuard, HostPolicy, token_dependency
from lovia.web.errors import WebError

from .helpers import Gate, ThreadServer, iter_frames, scripted_agent, sse, wait_for

TOKEN = "r0uter-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def mounted(tmp_path: Path, gate: Gate) -> Iterator[tuple[ThreadServer, RouterDeps]]:
    deps = RouterDeps(agents={"bot": scripted_agent(gate, name="bot")}, store=ChatStore.sqlite(tmp_path / "r.db"))
    app = FastAPI(lifespan=deps.lifespan)
    app.add_middleware(HostOriginGuard, policy=HostPolicy())
    app.include_router(build_api_router(deps), prefix="/lovia", dependencies=[Depends(token_dependency(TOKEN))])

    @app.get("/mine")
    async def mine() -> dict[str, str]:  # the host app's own route, beside the API
        return {"owner": "host app"}

    with ThreadServer(app) as srv:
        yield srv, deps
    asyncio.run(deps.store.close())


def test_chat_and_sessions_under_a_prefix(mounted: tuple[ThreadServer, RouterDeps], gate: Gate) -> None:
    srv, deps = mounted
    base = srv.url + "/lovia"
    stream = sse(base, "/api/chat/stream", {"message": "tool lookup please"}, headers=AUTH)
    assert stream.names()[0] == "session" and stream.names()[-1] == "done"
    assert stream.text().startswith("Done:") and gate.runs == {"lookup": 1}
    sid = stream.of("session")[0]["session_id"]
    with httpx.Client(base_url=base, headers=AUTH, timeout=10) as http:
        assert http.get("/api/info").json()["default_agent"] == "bot"
        listed = http.get("/api/sessions").json()
        assert [s["id"] for s in listed] == [sid]
        detail = http.get(f"/api/sessions/{sid}").json()
        assert [e["type"] for e in detail["transcript"]] == ["input", "tool_call", "tool_result", "assistant_text"]
        assert http.patch(f"/api/sessions/{sid}", json={"title": "renamed"}).json()["title"] == "renamed"
        blocking = http.post("/api/chat", json={"message": "hello there", "session_id": sid})
        assert blocking.status_code == 200 and blocking.json()["output"] == "You said: hello there"
        assert http.delete(f"/api/sessions/{sid}").json() == {"deleted": sid}
        gone = http.get(f"/api/sessions/{sid}")  # a deleted chat reads as an empty one, as in 0.9.119
        assert gone.status_code == 200 and gone.json()["entries"] == []
        assert http.get("/api/sessions", params={"limit": 0}).json()["detail"][0]["loc"] == ["query", "limit"]
    assert httpx.get(srv.url + "/mine").json() == {"owner": "host app"}  # the host app keeps its routes
    assert httpx.get(srv.url + "/api/info", headers=AUTH).status_code == 404  # only under the prefix
    assert deps.supervisor.live_runs == []


def test_a_live_run_streams_through_the_mounted_router(mounted: tuple[ThreadServer, RouterDeps], gate: Gate) -> None:
    srv, deps = mounted
    base = srv.url + "/lovia"
    first = sse(base, "/api/chat/stream", {"message": "slow run"}, until="tool_call", headers=AUTH)
    sid = first.of("session")[0]["session_id"]
    wait_for(lambda: gate.runs.get("slow"))
    with httpx.Client(base_url=base, headers=AUTH, timeout=10) as http:
        assert [r["session_id"] for r in http.get("/api/runs").json()] == [sid]
        busy = http.post("/api/chat", json={"message": "x", "session_id": sid})
        assert busy.status_code == 409 and busy.json()["detail"]["code"] == "run_active"
        with http.stream("POST", f"/api/chat/reconnect?session_id={sid}") as attached:
            names = []
            for frame in iter_frames(attached):
                names.append(frame.event)
                if frame.event == "snapshot":
                    assert frame.data["status"] == "running"
                    gate.release.set()  # the run finishes while we are attached
        assert names[:2] == ["session", "snapshot"] and names[-1] == "done"
        wait_for(lambda: not http.get(f"/api/sessions/{sid}").json()["live"])


def test_the_routers_auth_and_origin_guard(mounted: tuple[ThreadServer, RouterDeps]) -> None:
    srv, _deps = mounted
    with httpx.Client(base_url=srv.url + "/lovia", timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer nope"}):
            for method, path in (("GET", "/api/sessions"), ("POST", "/api/chat/stream"), ("GET", "/api/events")):
                r = http.request(method, path, headers=headers, json={"message": "x"} if method == "POST" else None)
                assert r.status_code == 401 and r.json()["detail"]["code"] == "server_token", (method, path)
        assert http.get("/api/sessions", headers=AUTH).json() == []  # nothing started
        cross = http.post("/api/sessions", json={}, headers={**AUTH, "Origin": "http://evil.test"})
        assert cross.status_code == 403 and cross.json()["detail"]["code"] == "cross_origin"
        same = http.post("/api/sessions", json={"title": "own page"}, headers={**AUTH, "Origin": srv.url})
        assert same.status_code == 200
        assert [s["title"] for s in http.get("/api/sessions", headers=AUTH).json()] == ["own page"]


def test_create_app_serves_the_same_route_table(tmp_path: Path) -> None:
    deps = RouterDeps(agents={"bot": scripted_agent(name="bot")}, store=ChatStore.in_memory())
    bare = FastAPI()
    bare.include_router(build_api_router(deps))
    app = create_app(scripted_agent(name="bot"), db_path=str(tmp_path / "a.db"))
    assert set(bare.openapi()["paths"]) == set(app.openapi()["paths"])
    assert app.state.deps is app.state.lovia and isinstance(app.state.deps, RouterDeps)
    assert deps.schedules is not None
    asyncio.run(deps.schedules.close())


def test_router_deps_refuses_no_agents_with_a_hint() -> None:
    with pytest.raises(UserError) as info:
        RouterDeps(agents={}, store=ChatStore.in_memory())
    assert "RouterDeps" in str(info.value) and info.value.hint


def test_web_error_carries_the_documented_detail() -> None:
    err = WebError(409, "run_active", "busy", hint="wait")
    assert err.status_code == 409 and err.detail == {"code": "run_active", "message": "busy", "hint": "wait"}
    wrapped = WebError.from_exc(400, "invalid_request", UserError("bad", hint="fix it"))
    assert wrapped.detail == {"code": "invalid_request", "message": "bad", "hint": "fix it"}


def test_a_whole_create_app_mounted_under_a_prefix(tmp_path: Path) -> None:
    from contextlib import asynccontextmanager
    from typing import Any

    lovia_app = create_app(scripted_agent(name="bot"), db_path=str(tmp_path / "m.db"))

    @asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        async with lovia_app.state.deps.lifespan():  # Starlette runs only the outer app's lifespan
            yield
        await lovia_app.state.deps.store.close()

    outer = FastAPI(lifespan=lifespan)
    outer.mount("/lovia", lovia_app)
    with ThreadServer(outer) as srv, httpx.Client(base_url=srv.url + "/lovia", timeout=10) as http:
        page = http.get("/")
        assert page.status_code == 200 and 'src="static/app.js"' in page.text
        assert http.get("/static/app.js").status_code == 200
        assert http.post("/api/chat", json={"message": "hello"}).json()["output"] == "You said: hello"
        refused = http.post("/api/sessions", json={}, headers={"Origin": "http://evil.test"})
        assert refused.status_code == 403 and refused.json()["detail"]["code"] == "cross_origin"
        assert http.get("/api/nope").json()["detail"]["code"] == "not_found"
