"""``create_app``'s serving options, each driven over real HTTP (uvicorn in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request

from lovia import Agent, RunContext, tool
from lovia.exceptions import UserError
from lovia.reliability import RunBudget
from lovia.stores import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.tracing import InMemoryTracer
from lovia.transcript import TranscriptEntry
from lovia.web import ChatUI, RunTrigger, create_app, serve
from lovia.web.run_deps import MAX_CLIENT_CONTEXT_BYTES, build_run_deps, client_context_size

from .helpers import Gate, ThreadServer, last_user, scripted_agent, sse, wait_for


@contextlib.contextmanager
def served(app: FastAPI) -> Iterator[httpx.Client]:
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        yield http


def code_of(response: httpx.Response) -> str:
    return str(response.json()["detail"]["code"])


def live_session(http: httpx.Client) -> str:
    """The chat of the one live run (waits for it to show up)."""
    runs = wait_for(lambda: http.get("/api/runs").json(), timeout=30)
    return str(runs[0]["session_id"])


class Blocking:
    """``POST /api/chat`` in a thread (it answers only when its run ends)."""

    def __init__(self, base: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.response: httpx.Response | None = None
        self.thread = threading.Thread(target=self._post, args=(base, body, headers or {}), daemon=True)
        self.thread.start()

    def _post(self, base: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.response = httpx.post(base + "/api/chat", json=body, headers=headers, timeout=60)

    def result(self) -> httpx.Response:
        self.thread.join(timeout=60)
        assert self.response is not None, "the blocking turn never answered"
        return self.response


# --------------------------------------------------------------------------- the concurrent-run cap


def test_the_run_cap_answers_429_for_chat_stream_and_schedules(tmp_path: Path, gate: Gate) -> None:
    app = create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"), max_background_runs=1, max_queued_runs=0)
    with served(app) as http:
        assert app.state.deps.supervisor.max_background_runs == 1
        held = Blocking(str(http.base_url), {"message": "slow run"})
        busy_sid = live_session(http)
        wait_for(lambda: gate.runs.get("slow"), timeout=30)

        refused = http.post("/api/chat", json={"message": "hello"})
        assert refused.status_code == 429 and code_of(refused) == "too_many_runs"
        assert refused.json()["detail"]["hint"] and refused.headers["retry-after"]
        streamed = http.post("/api/chat/stream", json={"message": "hello"})
        assert streamed.status_code == 429 and code_of(streamed) == "too_many_runs"
        assert [s["id"] for s in http.get("/api/sessions").json()] == [busy_sid]  # nothing left behind

        sched = http.post("/api/schedules", json={"input": "ping", "trigger_kind": "every", "trigger_expr": "3600"})
        fired = http.post(f"/api/schedules/{sched.json()['id']}/run")
        assert fired.status_code == 409 and "concurrent runs" in fired.json()["detail"]["message"]
        history = http.get(f"/api/schedules/{sched.json()['id']}/runs").json()
        assert history and "concurrent runs" in history[0]["error"]

        gate.release.set()
        assert held.result().status_code == 200
        wait_for(lambda: http.get("/api/runs").json() == [], timeout=30)
        again = http.post("/api/chat", json={"message": "hello"})
        assert again.status_code == 200 and again.json()["output"] == "You said: hello"


def test_max_background_runs_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), max_background_runs=0)
    assert err.value.hint


# --------------------------------------------------------------------------- blocking turns


def test_a_cancelled_blocking_turn_answers_409_run_cancelled(tmp_path: Path, gate: Gate) -> None:
    with served(create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"))) as http:
        held = Blocking(str(http.base_url), {"message": "slow run"})
        sid = live_session(http)
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
        assert http.post("/api/chat/cancel", params={"session_id": sid}).json() == {"stopped": True}
        answer = held.result()
        assert answer.status_code == 409 and code_of(answer) == "run_cancelled"
        assert answer.json()["detail"]["hint"]
        kinds = [e["type"] for e in http.get(f"/api/sessions/{sid}").json()["transcript"]]
        assert kinds[:3] == ["input", "tool_call", "tool_result"]  # the completed turn was kept


def test_deleting_the_chat_stops_its_blocking_turn(tmp_path: Path, gate: Gate) -> None:
    with served(create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"))) as http:
        held = Blocking(str(http.base_url), {"message": "slow run"})
        sid = live_session(http)
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
        assert http.delete(f"/api/sessions/{sid}").status_code == 200
        answer = held.result()
        assert answer.status_code == 409 and code_of(answer) == "run_cancelled"


def test_shutdown_stops_a_blocking_turn_with_run_cancelled(tmp_path: Path, gate: Gate) -> None:
    srv = ThreadServer(create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"))).__enter__()
    try:
        held = Blocking(srv.url, {"message": "slow run"})
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
    finally:
        srv.stop()
    answer = held.result()
    assert answer.status_code == 409 and code_of(answer) == "run_cancelled"


def test_a_client_leaving_a_blocking_turn_does_not_stop_it(tmp_path: Path, gate: Gate) -> None:
    with served(create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"))) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/api/chat", json={"message": "slow run"}, timeout=httpx.Timeout(60, read=1.5))
        sid = live_session(http)
        gate.release.set()
        wait_for(lambda: http.get("/api/runs").json() == [], timeout=30)
        transcript = http.get(f"/api/sessions/{sid}").json()["transcript"]
        assert transcript[-1]["type"] == "assistant_text" and transcript[-1]["content"].startswith("Done:")


def test_a_failed_blocking_turn_answers_500_run_failed(tmp_path: Path) -> None:
    def script(entries: list[TranscriptEntry], _tools: Any) -> Any:
        raise RuntimeError("the model fell over")

    agent = Agent(name="broken", model=ScriptedProvider(script))
    with served(create_app(agent, db_path=str(tmp_path / "a.db"))) as http:
        answer = http.post("/api/chat", json={"message": "hi"})
        assert answer.status_code == 500 and code_of(answer) == "run_failed"
        assert "fell over" in answer.json()["detail"]["message"]


def test_a_blocking_turn_denies_gated_calls_instead_of_waiting(tmp_path: Path, gate: Gate) -> None:
    with served(create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"))) as http:
        answer = http.post("/api/chat", json={"message": "remove notes.txt"})
        assert answer.status_code == 200, answer.text
        assert "remove" not in gate.runs  # nobody could approve it: denied, never run
        results = [e for e in http.get(f"/api/sessions/{answer.json()['session_id']}").json()["transcript"]]
        assert any(e["type"] == "tool_result" and e.get("is_error") for e in results)


def test_approval_timeout_denies_an_unanswered_call(tmp_path: Path, gate: Gate) -> None:
    app = create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"), approval_timeout=0.5)
    with ThreadServer(app) as srv:
        started = time.monotonic()
        stream = sse(srv.url, "/api/chat/stream", {"message": "remove notes.txt"}, timeout=60)
        assert "approval_required" in stream.names() and stream.names()[-1] == "done"
        assert "remove" not in gate.runs and time.monotonic() - started < 30


# --------------------------------------------------------------------------- authentication


def test_an_auth_dependency_guards_the_api(tmp_path: Path) -> None:
    async def my_auth(request: Request) -> None:
        user = request.headers.get("x-user")
        if user is None:
            raise HTTPException(status_code=401, detail="sign in first")
        if user != "ann":
            raise HTTPException(status_code=403, detail="not you")
        request.state.user = user

    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), auth=my_auth)
    assert app.state.guarded
    with served(app) as http:
        assert http.get("/api/info").status_code == 401
        assert http.post("/api/chat", json={"message": "hi"}).status_code == 401
        assert http.get("/api/sessions", headers={"x-user": "bob"}).status_code == 403
        assert http.get("/api/info", headers={"x-user": "ann"}).status_code == 200
        ok = http.post("/api/chat", json={"message": "hi"}, headers={"x-user": "ann"})
        assert ok.status_code == 200 and ok.json()["output"] == "You said: hi"
        assert http.get("/healthz").status_code == 200 and http.get("/").status_code == 200  # public
        assert http.get("/api/docs").status_code == 401  # the schema follows the API's guard
        assert http.get("/api/openapi.json", headers={"x-user": "ann"}).status_code == 200


def test_token_and_auth_together_are_refused(tmp_path: Path) -> None:
    async def my_auth() -> None:
        return None

    with pytest.raises(UserError, match="not both"):
        create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), token="t", auth=my_auth)


def test_the_token_guards_the_api_but_not_health(tmp_path: Path) -> None:
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), token="s3cret")) as http:
        denied = http.get("/api/sessions")
        assert denied.status_code == 401 and code_of(denied) == "server_token"
        assert http.get("/api/sessions", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert http.get("/healthz").status_code == 200 and http.get("/").status_code == 200


# --------------------------------------------------------------------------- lifespan


def test_the_user_lifespan_wraps_lovias(tmp_path: Path) -> None:
    log: list[str] = []
    holder: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        deps = app.state.deps
        log.append(f"user up (scheduler running: {deps.scheduler._task is not None})")
        yield {"pool": "db-pool"}
        log.append(f"user down (runs wound down: {deps.supervisor.closing})")

    def run_deps(trigger: RunTrigger) -> str:
        assert trigger.request is not None
        holder["pool"] = trigger.request.state.pool  # the state the lifespan yielded
        return "deps"

    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), lifespan=lifespan, run_deps=run_deps)
    with served(app) as http:
        assert log == ["user up (scheduler running: False)"]  # ours starts inside theirs
        assert http.post("/api/chat", json={"message": "hi"}).status_code == 200
        log.append("served")
    assert holder == {"pool": "db-pool"}
    assert log[1:] == ["served", "user down (runs wound down: True)"]


def test_lovias_own_lifespan_runs_without_a_user_one(tmp_path: Path) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"))
    with served(app) as http:
        assert app.state.deps.scheduler._task is not None
        assert http.get("/healthz").json() == {"status": "ok"}
    assert app.state.deps.supervisor.closing


# --------------------------------------------------------------------------- CORS


def test_cors_origins_allow_exactly_those_origins(tmp_path: Path) -> None:
    ok_origin, evil = "https://chat.example.com", "https://evil.example"
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), cors_origins=[ok_origin])
    with served(app) as http:
        preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
        good = http.options("/api/chat", headers={"Origin": ok_origin, **preflight})
        assert good.status_code == 200 and good.headers["access-control-allow-origin"] == ok_origin
        assert "access-control-allow-credentials" not in good.headers  # no credentialed CORS
        bad = http.options("/api/chat", headers={"Origin": evil, **preflight})
        assert "access-control-allow-origin" not in bad.headers

        posted = http.post("/api/chat", json={"message": "hi"}, headers={"Origin": ok_origin})
        assert posted.status_code == 200 and posted.headers["access-control-allow-origin"] == ok_origin
        foreign = http.post("/api/chat", json={"message": "hi"}, headers={"Origin": evil})
        assert foreign.status_code == 403 and code_of(foreign) == "cross_origin"
        assert "access-control-allow-origin" not in foreign.headers


def test_without_cors_origins_no_cors_headers_and_other_origins_refused(tmp_path: Path) -> None:
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"))) as http:
        origin = {"Origin": "https://chat.example.com"}
        assert "access-control-allow-origin" not in http.get("/api/info", headers=origin).headers
        assert http.post("/api/chat", json={"message": "hi"}, headers=origin).status_code == 403


# --------------------------------------------------------------------------- run deps


def deps_agent(gate: Gate) -> Agent[Any]:
    """``who ...`` calls ``whoami`` (which reports ``ctx.deps``); ``slow ...`` holds the run open."""
    seen: list[Any] = []

    @tool
    def whoami(ctx: RunContext[Any]) -> str:
        """Say whose run this is."""
        seen.append(ctx.deps)
        return f"deps={ctx.deps!r}"

    @tool
    async def hold() -> str:
        """Wait until the test releases the run."""
        gate.bump("hold")
        while not gate.release.is_set():
            await asyncio.sleep(0.02)
        return "released"

    def script(entries: list[TranscriptEntry], _tools: Any) -> Any:
        said, results = last_user(entries)
        if said.startswith("who") and results == 0:
            return call("whoami", {}, call_id=f"call_who_{len(entries)}")
        if said.startswith("slow") and results == 0:
            return call("hold", {}, call_id=f"call_hold_{len(entries)}")
        return text(f"ok: {said}")

    agent = Agent(name="deps", model=ScriptedProvider(script), tools=[whoami, hold])
    agent.seen = seen  # type: ignore[attr-defined]
    return agent


def test_run_deps_get_the_client_context_and_become_ctx_deps(tmp_path: Path, gate: Gate) -> None:
    triggers: list[RunTrigger] = []

    async def run_deps(trigger: RunTrigger) -> dict[str, Any]:
        triggers.append(trigger)
        if trigger.client_context.get("kb") == "forbidden":
            raise HTTPException(400, "unknown knowledge base 'forbidden'")
        return {"kb": trigger.client_context.get("kb", "docs"), "source": trigger.source}

    agent = deps_agent(gate)
    app = create_app(agent, db_path=str(tmp_path / "a.db"), run_deps=run_deps)
    with served(app) as http:
        answer = http.post("/api/chat", json={"message": "who am i", "context": {"kb": "legal"}})
        assert answer.status_code == 200, answer.text
        assert agent.seen == [{"kb": "legal", "source": "user"}]  # type: ignore[attr-defined]
        first = triggers[-1]
        assert first.session_id == answer.json()["session_id"] and first.agent is agent
        assert first.request is not None and first.resumed is False

        stream = sse(str(http.base_url), "/api/chat/stream", {"message": "who streams", "context": {"kb": "hr"}})
        assert stream.names()[-1] == "done"
        assert agent.seen[-1] == {"kb": "hr", "source": "user"}  # type: ignore[attr-defined]

        refused = http.post("/api/chat", json={"message": "who", "context": {"kb": "forbidden"}})
        assert refused.status_code == 400 and "forbidden" in refused.json()["detail"]["message"]
        assert len(http.get("/api/sessions").json()) == 2  # the refusal created no chat


def test_a_message_joining_a_live_run_keeps_its_context(tmp_path: Path, gate: Gate) -> None:
    triggers: list[RunTrigger] = []
    app = create_app(deps_agent(gate), db_path=str(tmp_path / "a.db"), run_deps=triggers.append)
    with served(app) as http:
        held = Blocking(str(http.base_url), {"message": "slow one", "context": {"kb": "a"}})
        sid = live_session(http)
        wait_for(lambda: gate.runs.get("hold"), timeout=30)
        joined = sse(
            str(http.base_url),
            "/api/chat/stream",
            {"message": "also this", "session_id": sid, "context": {"kb": "b"}},
            until="snapshot",
        )
        assert joined.of("snapshot")[0]["status"] == "running"
        assert [t.client_context for t in triggers] == [{"kb": "a"}]  # no second call for the joiner
        assert app.state.deps.supervisor.get(sid).client_context == {"kb": "a"}
        gate.release.set()
        assert held.result().status_code == 200


def test_a_client_context_over_64kb_is_refused_with_422(tmp_path: Path) -> None:
    calls: list[RunTrigger] = []
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), run_deps=calls.append)) as http:
        big = {"blob": "x" * MAX_CLIENT_CONTEXT_BYTES}
        for path in ("/api/chat", "/api/chat/stream"):
            refused = http.post(path, json={"message": "hi", "context": big})
            assert refused.status_code == 422 and code_of(refused) == "invalid_request"
            assert refused.json()["detail"]["hint"]
        schedule = {"input": "x", "trigger_kind": "every", "trigger_expr": "60", "context": big}
        assert http.post("/api/schedules", json=schedule).status_code == 422
        not_an_object = http.post("/api/chat", json={"message": "hi", "context": ["a", "list"]})
        assert not_an_object.status_code == 422
        assert http.get("/api/sessions").json() == [] and calls == []
        just_fits = {"k": "y" * (MAX_CLIENT_CONTEXT_BYTES - 20)}
        assert client_context_size(just_fits) <= MAX_CLIENT_CONTEXT_BYTES
        assert http.post("/api/chat", json={"message": "hi", "context": just_fits}).status_code == 200
        assert calls[-1].client_context == just_fits


def test_a_schedule_fire_gets_its_stored_context_and_no_request(tmp_path: Path, gate: Gate) -> None:
    triggers: list[RunTrigger] = []
    agent = deps_agent(gate)

    def run_deps(trigger: RunTrigger) -> str:
        triggers.append(trigger)
        return f"kb={trigger.client_context.get('kb')}"

    with served(create_app(agent, db_path=str(tmp_path / "a.db"), run_deps=run_deps)) as http:
        body = {"input": "who fires", "trigger_kind": "every", "trigger_expr": "3600", "context": {"kb": "ops"}}
        sched = http.post("/api/schedules", json=body).json()
        fired = http.post(f"/api/schedules/{sched['id']}/run")
        assert fired.status_code == 200, fired.text
        wait_for(lambda: agent.seen, timeout=30)  # type: ignore[attr-defined]
        assert agent.seen == ["kb=ops"]  # type: ignore[attr-defined]
        trigger = triggers[-1]
        assert trigger.source == f"schedule:{sched['id']}" and trigger.request is None
        assert trigger.session_id == fired.json()["session_id"]


def test_a_schedules_context_survives_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    with served(create_app(scripted_agent(), db_path=db)) as http:
        body = {"input": "ping", "trigger_kind": "every", "trigger_expr": "3600", "context": {"kb": "ops"}}
        sched = http.post("/api/schedules", json=body).json()
    triggers: list[RunTrigger] = []
    with served(create_app(scripted_agent(), db_path=db, run_deps=triggers.append)) as http:
        assert http.post(f"/api/schedules/{sched['id']}/run").status_code == 200
        assert [t.client_context for t in triggers] == [{"kb": "ops"}]


def test_build_run_deps_without_a_function_gives_none() -> None:
    trigger = RunTrigger(session_id="s", agent=scripted_agent(), source="user", client_context={"kb": "x"})
    assert asyncio.run(build_run_deps(None, trigger)) is None
    assert asyncio.run(build_run_deps(lambda t: t.source, trigger)) == "user"


# --------------------------------------------------------------------------- run settings


def test_the_tracer_receives_the_served_runs_spans(tmp_path: Path) -> None:
    tracer = InMemoryTracer()
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), tracer=tracer)) as http:
        assert http.post("/api/chat", json={"message": "tool lookup"}).status_code == 200
    names = [span.name for span in tracer.spans]
    assert "run" in names and "model_call" in names and "tool_call" in names


def test_the_budget_is_fresh_for_every_run(tmp_path: Path, gate: Gate) -> None:
    budget = RunBudget(max_tool_calls=1)
    app = create_app(scripted_agent(gate), db_path=str(tmp_path / "a.db"), budget=budget)
    with served(app) as http:
        for n in range(2):  # one tool call each: a shared budget would refuse the second run
            ok = http.post("/api/chat", json={"message": f"tool lookup {n}"})
            assert ok.status_code == 200 and ok.json()["output"].startswith("Done:")
        over = http.post("/api/chat", json={"message": "slow run"})  # two tool calls in one run
        assert over.status_code == 500 and code_of(over) == "run_failed"
        assert "tool call limit" in over.json()["detail"]["message"]
    assert budget.tool_calls == 0 and app.state.deps.fresh_budget() is not budget


# --------------------------------------------------------------------------- storage, titles, follow-ups, page


def test_a_session_of_your_own_keeps_the_transcripts(tmp_path: Path) -> None:
    session = InMemorySession()
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), session=session)
    assert app.state.deps.session is session
    with served(app) as http:
        sid = http.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        assert http.get(f"/api/sessions/{sid}").json()["transcript"][-1]["content"] == "You said: hi"
    assert asyncio.run(session.load(sid))
    with pytest.raises(UserError, match="not both"):
        create_app(scripted_agent(), store=app.state.deps.store, session=session)


def test_a_title_model_titles_a_new_chat(tmp_path: Path) -> None:
    titler = ScriptedProvider([text("Greeting And Reply")])
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), title_model=titler)
    with served(app) as http:
        sid = http.post("/api/chat", json={"message": "hello there"}).json()["session_id"]
        wait_for(lambda: http.get(f"/api/sessions/{sid}").json()["title"] == "Greeting And Reply", timeout=30)
        http.post("/api/chat", json={"message": "again", "session_id": sid})  # a later run does not retitle
        assert http.get(f"/api/sessions/{sid}").json()["title"] == "Greeting And Reply"


def test_titles_off_keeps_the_first_message_title(tmp_path: Path) -> None:
    titler = ScriptedProvider([text("Never Used")])
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), title_model=titler, titles=False)
    with served(app) as http:
        sid = http.post("/api/chat", json={"message": "hello there"}).json()["session_id"]
        time.sleep(0.3)  # give a (wrongly) scheduled title task the chance to land
        assert http.get(f"/api/sessions/{sid}").json()["title"] == "hello there"


def test_a_slow_suggester_times_out_to_an_empty_list(tmp_path: Path) -> None:
    async def slow(_request: Any) -> list[str]:
        await asyncio.sleep(60)
        return ["never"]

    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), followups=slow, followup_timeout=0.3)
    with served(app) as http:
        sid = http.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        started = time.monotonic()
        answer = http.post(f"/api/sessions/{sid}/followups")
        assert answer.json() == {"followups": []} and time.monotonic() - started < 20


def test_ui_false_serves_the_api_only(tmp_path: Path) -> None:
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), ui=False)) as http:
        assert http.get("/").status_code == 404 and http.get("/api/info").status_code == 200


def test_accepted_options_land_on_router_deps(tmp_path: Path) -> None:
    class Runtime:  # the part of ConfigRuntime create_app uses: it is bound to the app's deps
        bound: Any = None

        def bind(self, deps: Any) -> None:
            self.bound = deps

    runtime = Runtime()
    app = create_app(
        scripted_agent(name="bot"),
        db_path=tmp_path / "a.db",
        config_runtime=runtime,
        wire_subagents=False,
        approval_timeout=5.0,
    )
    deps = app.state.deps
    assert deps.config_runtime is runtime and runtime.bound is deps
    assert deps.wire_subagents is False and deps.approval_timeout == 5.0
    assert (
        deps.default_agent == "bot"
        and deps.pick(None) is deps.agents["bot"]
        and deps.name_of(deps.pick("bot")) == "bot"
    )
    assert deps.bus is deps.supervisor.hub and deps.fresh_budget() is None


# --------------------------------------------------------------------------- serve()


def test_serve_refuses_an_unguarded_app_beyond_loopback(tmp_path: Path) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "a.db"))
    with pytest.raises(UserError, match="without token= or auth="):
        serve(app, host="0.0.0.0", echo=lambda _line: None)
    with pytest.raises(UserError, match="ready app"):
        serve(app, db_path=str(tmp_path / "b.db"), echo=lambda _line: None)
    with pytest.raises(UserError, match="one worker"):
        serve(app, workers=2, echo=lambda _line: None)


def test_a_resumed_run_gets_run_deps_with_resumed_set(tmp_path: Path, gate: Gate) -> None:
    db = str(tmp_path / "a.db")
    first = ThreadServer(create_app(scripted_agent(gate), db_path=db)).__enter__()
    try:
        sse(first.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call")
        wait_for(lambda: gate.runs.get("slow"), timeout=30)
    finally:
        first.stop()  # the run is interrupted, its checkpoint kept
    gate.release.set()
    triggers: list[RunTrigger] = []
    with served(create_app(scripted_agent(gate), db_path=db, run_deps=triggers.append)) as http:
        sid = http.get("/api/sessions").json()[0]["id"]
        # The server resumes the interrupted run at start, with no page asking: no request to pass.
        wait_for(lambda: http.get(f"/api/sessions/{sid}").json()["active_run_id"] is None, timeout=60)
        assert [(t.session_id, t.resumed, t.source) for t in triggers] == [(sid, True, "user")]
        assert triggers[0].request is None and triggers[0].client_context == {}


def test_a_chat_ui_object_customizes_the_served_page(tmp_path: Path) -> None:
    ui = ChatUI(empty_title="Ask the <release> desk")
    with served(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"), ui=ui)) as http:
        page = http.get("/")
        assert page.status_code == 200 and "Ask the &lt;release&gt; desk" in page.text  # escaped, not markup
