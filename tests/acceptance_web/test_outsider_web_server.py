"""The web server page (``web-server.md``) checked from the outside.

Every Python example on the page, and each option it names, tried as written against a
``TestClient``: ``create_app`` and ``serve``, your own lifespan, ``ChatUI`` and the assets folder,
template blocks, tokens and ``auth=``, CORS, run deps, the path prefix, the supervised run
lifecycle, scheduling and ``start_session``, UI components and bulk data, follow-ups, subagents.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi import HTTPException, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.testclient import TestClient

import lovia.web
from lovia import Agent, RunContext, Subagents, UserError, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import (
    ChatStore,
    ChatUI,
    FollowupRequest,
    RunTrigger,
    Scheduling,
    create_app,
    generate_followups,
    generate_token,
    is_loopback,
    put_ui_data,
    serve,
    ui_result,
)

from .outsider_kit import Hold, app_client, collect, first, hold_agent, read_until, rest_of, scripted, wait_until


@dataclass
class Deps:
    """The run deps of the page's run-deps example."""

    user: str
    kb: str


# --------------------------------------------------------------------------- create_app and serve


def test_create_app_and_serve_defaults() -> None:
    params = inspect.signature(serve).parameters
    assert params["host"].default == "127.0.0.1" and params["port"].default == 8000
    from lovia.web.app import create_app as build

    options = inspect.signature(build).parameters
    expected = {
        "titles": True,
        "followups": False,
        "approval_timeout": None,
        "max_background_runs": 8,
        "ui": True,
        "cors_origins": None,
        "token": None,
        "auth": None,
        "lifespan": None,
        "run_deps": None,
        "title": "lovia",
        "tracer": None,
        "max_turns": 50,
    }
    assert {name: options[name].default for name in expected} == expected


def test_the_quick_start_example(tmp_path: Path) -> None:
    agent = Agent(name="assistant", model=ScriptedProvider([text("Hello!")]))
    app = create_app(agent, db_path=tmp_path / "lovia.db")
    with TestClient(app) as client:
        assert client.post("/api/chat", json={"message": "hi"}).json()["output"] == "Hello!"
    assert (tmp_path / "lovia.db").exists()  # transcripts, metadata and checkpoints in one file


def test_chats_default_to_a_file_named_after_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    agent = Agent(name="assistant", model=ScriptedProvider([text("Hello!")]))
    with TestClient(create_app(agent)) as client:
        assert client.post("/api/chat", json={"message": "hi"}).status_code == 200
    assert (tmp_path / ".lovia" / "assistant.db").is_file()


def test_an_agent_mapping_serves_every_agent(tmp_path: Path) -> None:
    agents = {"a": scripted("from a", name="a"), "b": scripted("from b", name="b")}
    with app_client(agents, tmp_path) as client:
        assert client.post("/api/chat", json={"message": "x"}).json()["output"] == "from a"
        assert client.post("/api/chat", json={"message": "x", "agent": "b"}).json()["output"] == "from b"


def test_serve_refuses_an_unguarded_app_off_loopback(tmp_path: Path) -> None:
    app = create_app(scripted("x"), db_path=tmp_path / "a.db")
    with pytest.raises(UserError):
        serve(app, host="0.0.0.0", port=1)  # refused before anything binds


def test_loopback_and_tokens() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.20") and not is_loopback("example.com")
    one, two = generate_token(), generate_token()
    assert isinstance(one, str) and len(one) >= 16 and one != two


def test_the_title_is_the_page_title_and_reported_by_info(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path, title="Acme") as client:
        assert client.get("/api/info").json()["title"] == "Acme"
        assert "<title>Acme" in client.get("/").text


# --------------------------------------------------------------------------- your own lifespan


def test_your_lifespan_wraps_lovias_and_its_state_reaches_the_request(tmp_path: Path) -> None:
    log: list[str] = []
    entered = threading.Event()

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        log.append("pool open")
        yield {"pool": "the-pool"}
        log.append("pool closed")

    def run_deps(trigger: RunTrigger) -> str:
        assert trigger.request is not None
        return str(trigger.request.state.pool)

    @tool
    async def which_pool(ctx: RunContext[str]) -> str:
        """Say which pool the run got."""
        return ctx.deps

    @tool
    async def long_task() -> str:
        """Work for a long time."""
        entered.set()
        try:
            await asyncio.sleep(30)
        finally:
            log.append("run wound down")
        return "done"

    agent = scripted(call("which_pool", {}), "ok", call("long_task", {}), "late", tools=[which_pool, long_task])
    with app_client(agent, tmp_path, lifespan=lifespan, run_deps=run_deps) as client:
        frames = collect(client, "/api/chat/stream", {"message": "pool?"})
        assert first(frames, "tool_result")["result"] == "the-pool"
        ctx = client.stream("POST", "/api/chat/stream", json={"message": "hold"})
        response = ctx.__enter__()
        read_until(response, lambda ev, _: ev == "tool_call")
        assert entered.wait(10)
        ctx.__exit__(None, None, None)
        log.append("server stopping")
    # lovia wound the live run down before your resources closed
    assert log == ["pool open", "server stopping", "run wound down", "pool closed"]


# --------------------------------------------------------------------------- the page and ChatUI


def test_chat_ui_copy_and_examples_are_on_the_page(tmp_path: Path) -> None:
    ui = ChatUI(
        empty_title="Ask Acme",
        empty_description=["Orders and returns.", "Deliveries too."],
        empty_examples=["Summarize today's tickets"],
        login_url="/login?next={next}",
        default_lang="zh",
        messages={"en": {"composer.placeholder": "Ask Acme anything…", "acme.help": "Help center"}},
    )
    with app_client(scripted("x"), tmp_path, title="Acme", ui=ui) as client:
        page = client.get("/").text
    for expected in ("Ask Acme", "Orders and returns.", "Deliveries too.", "Summarize today&#39;s tickets"):
        assert expected in page, expected
    assert "/login?next={next}" in page
    assert "Ask Acme anything…" in page and "acme.help" in page
    assert '"zh"' in page


def test_chat_ui_fields_and_defaults() -> None:
    ui = ChatUI()
    assert ui.empty_title is None and ui.empty_description is None
    assert tuple(ui.empty_examples) == () and tuple(ui.scripts) == () and tuple(ui.styles) == ()
    assert ui.login_url is None and ui.assets is None and ui.logo is None and ui.favicon is None
    assert dict(ui.messages) == {} and ui.default_lang is None


@pytest.fixture
def ui_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ui"
    folder.mkdir()
    (folder / "theme.css").write_text('[data-theme="light"] { --accent: #6d28d9; }\n')
    (folder / "acme.js").write_text("window.lovia.ready.then(() => {});\n")
    (folder / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (folder / "favicon.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / ".secret").write_text("hidden")
    (folder / "banner.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return folder


def test_the_assets_folder_is_served_at_ui(tmp_path: Path, ui_dir: Path) -> None:
    ui = ChatUI(assets=ui_dir, styles=["theme.css"], logo="logo.svg", favicon="favicon.png", scripts=["acme.js"])
    with app_client(scripted("x"), tmp_path, ui=ui) as client:
        css = client.get("/ui/theme.css")
        assert css.status_code == 200 and "--accent" in css.text
        assert client.get("/ui/acme.js").status_code == 200
        assert client.get("/ui/.secret").status_code == 404  # dotfiles are private
        (ui_dir / "notes.html").write_text("<p>template</p>")
        assert client.get("/ui/notes.html").status_code == 404  # templates are private
        assert client.get("/ui/../chat.db").status_code == 404
        page = client.get("/").text
        for name in ("ui/theme.css", "ui/logo.svg", "ui/favicon.png", "ui/acme.js"):
            assert name in page, name
        (ui_dir / "theme.css").write_text(":root { --radius: 8px; }\n")  # an edit shows without a restart
        assert "--radius: 8px" in client.get("/ui/theme.css").text


def test_names_may_be_app_paths_or_urls(tmp_path: Path) -> None:
    ui = ChatUI(styles=["/brand/theme.css", "https://cdn.example.com/theme.css"])
    with TestClient(create_app(scripted("x"), db_path=tmp_path / "a.db", ui=ui), root_path="/lovia") as client:
        page = client.get("/").text
    assert "/lovia/brand/theme.css" in page  # an app path keeps the prefix
    assert "https://cdn.example.com/theme.css" in page


def test_template_blocks_extend_the_bundled_page(tmp_path: Path, ui_dir: Path) -> None:
    (ui_dir / "index.html").write_text(
        """{% extends "lovia/index.html" %}
{% block head %}<meta name="acme" content="yes">{% endblock %}
{% block sidebar_nav %}<a href="/help" data-i18n="acme.help">Help center</a>{% endblock %}
{% block welcome %}{{ super() }}<p class="acme-notice">Scheduled maintenance tonight at 22:00.</p>{% endblock %}
{% block sidebar_footer %}<a class="signout" href="/logout">Sign out</a>{% endblock %}
{% block topbar_actions %}<button id="acme-top">Top</button>{% endblock %}
{% block composer_actions %}<select id="acme-kb"><option>docs</option></select>{% endblock %}
{% block body_end %}<span id="acme-end"></span>{% endblock %}
{% block sidebar_header %}<span id="acme-brand">Acme</span>
<img src="{{ url_for('ui-assets', path='banner.png').path }}" alt="">{% endblock %}
"""
    )
    ui = ChatUI(assets=ui_dir, empty_title="Welcome to Acme")
    with TestClient(create_app(scripted("x"), db_path=tmp_path / "a.db", ui=ui)) as client:
        page = client.get("/").text
        assert client.get("/ui/index.html").status_code == 404
    for expected in (
        '<meta name="acme" content="yes">',
        'data-i18n="acme.help"',
        "Scheduled maintenance tonight at 22:00.",
        "Welcome to Acme",  # super() kept the default title
        'class="signout"',
        'id="acme-top"',
        'id="acme-kb"',
        'id="acme-end"',
        'id="acme-brand"',
        "/ui/banner.png",
    ):
        assert expected in page, expected
    with TestClient(create_app(scripted("x"), db_path=tmp_path / "b.db", ui=ui), root_path="/lovia") as client:
        assert "/lovia/ui/banner.png" in client.get("/").text


def test_the_design_tokens_and_the_cascade_layer() -> None:
    static = Path(lovia.web.__file__).parent / "static"
    css = "".join(p.read_text(encoding="utf-8") for p in static.glob("*.css"))
    assert "@layer lovia" in css or "layer(lovia)" in css
    tokens = ["--bg", "--surface", "--surface-2", "--surface-3", "--border", "--border-strong", "--ink", "--ink-2"]
    tokens += ["--muted", "--muted-2", "--accent", "--accent-hover", "--accent-soft", "--accent-text"]
    tokens += ["--user-surface", "--user-border", "--warn", "--danger", "--ok", "--sans", "--mono"]
    tokens += [f"--chart-{i}" for i in range(1, 9)] + ["--radius-xs", "--radius-xl", "--sidebar-w", "--content-w"]
    missing = [t for t in tokens if f"{t}:" not in css]
    assert missing == []


def test_the_type_declarations_ship_with_the_package() -> None:
    declarations = Path(lovia.web.__file__).parent / "static" / "lovia.d.ts"
    assert declarations.is_file() and "registerRenderer" in declarations.read_text(encoding="utf-8")


def test_init_ui_scaffold_changes_nothing_until_edited(tmp_path: Path) -> None:
    from lovia.cli import main

    assert main(["web", "init-ui", str(tmp_path / "ui")]) == 0
    made = {p.name for p in (tmp_path / "ui").iterdir()}
    assert {"index.html", "theme.css", "extension.js"} <= made
    ui = ChatUI(assets=tmp_path / "ui", styles=["theme.css"], scripts=["extension.js"])
    with TestClient(create_app(scripted("x"), db_path=tmp_path / "a.db", ui=ui)) as client:
        page = client.get("/")
        assert page.status_code == 200 and 'data-part="composer"' in page.text


# --------------------------------------------------------------------------- authentication


def test_token_cookie_from_a_token_link(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path, token="s3cret") as client:
        page = client.get("/", params={"token": "s3cret"})
        assert page.status_code == 200
        cookie = page.headers["set-cookie"]
        assert cookie.startswith("lovia_token=s3cret") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert client.get("/api/sessions").status_code == 200  # the cookie now carries the token
        client.cookies.clear()
        assert "set-cookie" not in client.get("/", params={"token": "wrong"}).headers
        assert client.get("/api/sessions").status_code == 401


def test_the_shell_static_assets_and_healthz_stay_public(tmp_path: Path) -> None:
    async def my_auth(request: Request) -> None:
        if request.cookies.get("session") != "ok":
            raise HTTPException(status_code=401)

    with app_client(scripted("x"), tmp_path, auth=my_auth) as client:
        assert client.get("/").status_code == 200
        assert client.get("/static/api.js").status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/sessions").status_code == 401
        assert client.post("/api/chat", json={"message": "x"}).status_code == 401
        client.cookies.set("session", "ok")
        assert client.get("/api/sessions").status_code == 200


def test_auth_state_reaches_run_deps(tmp_path: Path) -> None:
    async def auth(request: Request) -> None:
        request.state.user = request.headers.get("x-user", "anonymous")

    knowledge_bases = {"docs", "legal"}

    def run_deps(trigger: RunTrigger) -> Deps:
        user = trigger.request.state.user if trigger.request else "scheduler"
        kb = trigger.client_context.get("kb", "docs")
        if kb not in knowledge_bases:
            raise HTTPException(400, f"unknown knowledge base {kb!r}")
        return Deps(user=user, kb=str(kb))

    @tool
    async def search(ctx: RunContext[Deps], query: str) -> str:
        """Search the user's knowledge base."""
        return f"{ctx.deps.user} searched {ctx.deps.kb} for {query}"

    agent = scripted(call("search", {"query": "leave"}), "found", tools=[search])
    with app_client(agent, tmp_path, auth=auth, run_deps=run_deps) as client:
        frames = collect(
            client, "/api/chat/stream", {"message": "q", "context": {"kb": "legal"}}, headers={"x-user": "ann"}
        )
        assert first(frames, "tool_result")["result"] == "ann searched legal for leave"
        refused = client.post("/api/chat", json={"message": "q", "context": {"kb": "secret"}})
        assert refused.status_code == 400
        assert "unknown knowledge base" in json.dumps(refused.json())
        assert len(client.get("/api/sessions").json()) == 1  # the refused message made no chat


def test_routes_you_add_are_yours_to_guard(tmp_path: Path) -> None:
    app = create_app(scripted("x"), db_path=tmp_path / "a.db", token="s3cret")

    @app.get("/mine")
    async def mine() -> dict[str, str]:
        return {"open": "yes"}

    with TestClient(app) as client:
        assert client.get("/mine").json() == {"open": "yes"}
        assert client.get("/api/sessions").status_code == 401


def test_cors_origins_unset_sends_no_cors_headers(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        answer = client.get("/api/info", headers={"Origin": "https://chat.example.com"})
        assert "access-control-allow-origin" not in answer.headers


def test_cors_origins_answers_those_origins(tmp_path: Path) -> None:
    origin = "https://chat.example.com"
    with app_client(scripted("hi"), tmp_path, cors_origins=[origin]) as client:
        preflight = client.options(
            "/api/chat",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == origin
        answer = client.post("/api/chat", json={"message": "x"}, headers={"Origin": origin})
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == origin


def test_your_own_credentialed_cors_middleware(tmp_path: Path) -> None:
    async def my_auth(request: Request) -> None:
        if request.cookies.get("session") != "ok":
            raise HTTPException(status_code=401)

    app = create_app(scripted("from far away"), db_path=tmp_path / "a.db", auth=my_auth)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["https://chat.example.com"],
        allow_credentials=True,
        allow_methods=["*"],
        allow_headers=["*"],
    )
    with TestClient(app) as client:
        client.cookies.set("session", "ok")
        origin = {"Origin": "https://chat.example.com"}
        answer = client.post("/api/chat", json={"message": "x"}, headers=origin)
        assert answer.status_code == 200, answer.text
        assert answer.json()["output"] == "from far away"
        assert answer.headers["access-control-allow-credentials"] == "true"


# --------------------------------------------------------------------------- run deps


def test_run_deps_sync_or_async_once_per_run(tmp_path: Path) -> None:
    calls: list[RunTrigger] = []

    async def run_deps(trigger: RunTrigger) -> dict[str, str]:
        calls.append(trigger)
        return {"who": "me"}

    @tool
    async def who(ctx: RunContext[dict[str, str]]) -> str:
        """Who runs this."""
        return ctx.deps["who"]

    agent = scripted(call("who", {}), call("who", {}), "done", tools=[who])
    with app_client(agent, tmp_path, run_deps=run_deps) as client:
        frames = collect(client, "/api/chat/stream", {"message": "x", "context": {"tab": "orders"}})
    assert [d["result"] for ev, d in frames if ev == "tool_result"] == ["me", "me"]
    assert len(calls) == 1
    trigger = calls[0]
    assert trigger.source == "user" and trigger.resumed is False and trigger.request is not None
    assert trigger.client_context == {"tab": "orders"}
    assert trigger.session_id == first(frames, "session")["session_id"]
    assert trigger.agent.name == "bot"


def test_run_deps_refusing_a_schedule_fire_records_a_failed_run(tmp_path: Path) -> None:
    triggers: list[RunTrigger] = []

    def run_deps(trigger: RunTrigger) -> None:
        triggers.append(trigger)
        if trigger.source.startswith("schedule:"):
            raise HTTPException(403, "no scheduled runs today")

    with app_client(scripted("x"), tmp_path, run_deps=run_deps, scheduler_poll=0.05) as client:
        sched = client.post(
            "/api/schedules",
            json={"input": "nightly", "trigger_kind": "every", "trigger_expr": "1", "context": {"kb": "hr"}},
        ).json()
        fires = wait_until(lambda: client.get(f"/api/schedules/{sched['id']}/runs").json(), timeout=15)
        assert fires[0]["status"] == "failed" and fires[0]["error"]
        fired = [t for t in triggers if t.source == f"schedule:{sched['id']}"]
        assert fired and fired[0].request is None and fired[0].client_context == {"kb": "hr"}
        assert client.get(f"/api/schedules/{sched['id']}").json()["active"] is True  # it moves on
        assert client.get("/api/sessions").json() == []


def test_a_context_without_run_deps_logs_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), app_client(scripted("x"), tmp_path) as client:
        assert client.post("/api/chat", json={"message": "x", "context": {"kb": "docs"}}).status_code == 200
    assert any(r.levelno >= logging.WARNING and "context" in r.getMessage() for r in caplog.records)


def test_a_resume_after_a_restart_gets_its_context_back(tmp_path: Path) -> None:
    triggers: list[RunTrigger] = []

    def run_deps(trigger: RunTrigger) -> None:
        triggers.append(trigger)

    hold = Hold()
    db = tmp_path / "chat.db"
    with app_client(hold_agent(hold, "never"), tmp_path, db_path=db, run_deps=run_deps) as client:
        ctx = client.stream("POST", "/api/chat/stream", json={"message": "long", "context": {"kb": "legal"}})
        response = ctx.__enter__()
        sid = read_until(response, lambda ev, _: ev == "tool_call")[0][1]["session_id"]
        assert hold.entered.wait(10)
        ctx.__exit__(None, None, None)
    # The server stopped with the run in flight: its checkpoint stays, and the next server resumes
    # it on its own at start (nobody's request: request is None), with the context it started with.
    hold.release.set()
    open_hold = Hold()
    open_hold.release.set()  # the interrupted call runs again on resume: let it through at once
    resumed_agent = hold_agent(open_hold, "resumed answer")
    with app_client(resumed_agent, tmp_path, db_path=db, run_deps=run_deps) as client:
        deadline = time.monotonic() + 30

        def answers() -> list[str]:
            transcript = client.get(f"/api/sessions/{sid}").json()["transcript"]
            return [e.get("content") for e in transcript if e["type"] == "assistant_text"]

        while not answers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answers() == ["resumed answer"]
    resume = triggers[-1]
    assert resume.resumed is True and resume.source == "user" and resume.request is None
    assert resume.client_context == {"kb": "legal"}


# --------------------------------------------------------------------------- supervised runs


def test_approval_timeout_denies_an_abandoned_call(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def deploy() -> str:
        """Deploy."""
        ran.append("deployed")
        return "deployed"

    agent = scripted(call("deploy", {}), "not deployed", tools=[deploy])
    with app_client(agent, tmp_path, approval_timeout=0.3) as client:
        frames = collect(client, "/api/chat/stream", {"message": "deploy"})
    assert "approval_required" in [ev for ev, _ in frames]
    assert first(frames, "tool_result")["is_error"] is True
    assert first(frames, "done")["output"] == "not deployed" and ran == []


# --------------------------------------------------------------------------- scheduling


def scheduling_agent(store: ChatStore, *turns: Any) -> Agent[Any]:
    return Agent(name="ops", model=ScriptedProvider(list(turns)), plugins=[Scheduling(store)])


def test_schedule_run_waits_for_the_users_approval(tmp_path: Path) -> None:
    store = ChatStore.sqlite(tmp_path / "lovia.db")
    proposal = {"instruction": "check the deploy log", "trigger": "every", "value": "60", "max_fires": 3}
    agent = scheduling_agent(store, call("schedule_run", proposal), "scheduled", call("schedule_run", proposal), "no")
    with TestClient(create_app(agent, store=store)) as client:
        with client.stream("POST", "/api/chat/stream", json={"message": "watch the deploy"}) as response:
            frames = read_until(response, lambda ev, _: ev == "approval_required")
            assert frames[-1][1]["name"] == "schedule_run"
            sid = first(frames, "session")["session_id"]
            assert client.get("/api/schedules").json() == []  # nothing before the user says yes
            client.post(
                "/api/chat/approve", json={"session_id": sid, "call_id": frames[-1][1]["id"], "decision": "approve"}
            )
            rest_of(response)
        (row,) = client.get("/api/schedules").json()
        assert row["session_id"] == sid and row["trigger_kind"] == "every" and row["max_fires"] == 3
        # a run nobody watches cannot approve: the blocking turn's proposal is denied
        assert client.post("/api/chat", json={"message": "again"}).json()["output"] == "no"
        assert len(client.get("/api/schedules").json()) == 1
        # continue_session=True binds it to the chat: deleting the chat deletes it
        client.delete(f"/api/sessions/{sid}")
        assert client.get("/api/schedules").json() == []


def test_cancel_schedule_needs_no_approval_and_keeps_the_record(tmp_path: Path) -> None:
    store = ChatStore.sqlite(tmp_path / "lovia.db")
    with TestClient(create_app(scheduling_agent(store, "x"), store=store)) as client:
        row = client.post(
            "/api/schedules", json={"input": "ping", "trigger_kind": "every", "trigger_expr": "60"}
        ).json()
    agent = scheduling_agent(store, call("cancel_schedule", {"schedule_id": row["id"]}), "cancelled")
    with TestClient(create_app(agent, store=store)) as client:
        assert client.post("/api/chat", json={"message": "stop pinging"}).json()["output"] == "cancelled"
        kept = client.get(f"/api/schedules/{row['id']}").json()
        assert kept["active"] is False


def test_start_session_opens_a_linked_independent_chat(tmp_path: Path) -> None:
    store = ChatStore.sqlite(tmp_path / "lovia.db")
    agent = scheduling_agent(
        store,
        call("start_session", {"instruction": "draft the summary", "title": "Summary"}),
        "started it",
        "summary done",
    )
    with TestClient(create_app(agent, store=store)) as client:
        frames = collect(client, "/api/chat/stream", {"message": "do it in a new chat"})
        sid = first(frames, "session")["session_id"]
        started = first(frames, "tool_result")["result"]
        assert set(started) >= {"session_id", "title", "status"} and started["title"] == "Summary"
        child = started["session_id"]
        chat = wait_until(lambda: (c := client.get(f"/api/sessions/{child}").json())["entries"] and c)
        assert chat["origin"]["kind"] == "spawn" and chat["origin"]["session_id"] == sid
        listed = {s["id"]: s for s in client.get("/api/sessions").json()}
        assert listed[child]["origin_kind"] == "spawn"
        wait_until(lambda: client.get("/api/runs").json() == [])
        client.delete(f"/api/sessions/{sid}")
        assert client.get(f"/api/sessions/{child}").status_code == 200  # it belongs to no one


def test_until_on_a_repeating_schedule_needs_a_safety_limit(tmp_path: Path) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        body = {"input": "check", "trigger_kind": "every", "trigger_expr": "60", "until": "it says ready"}
        assert client.post("/api/schedules", json=body).status_code in (400, 422)
        ok = client.post("/api/schedules", json={**body, "max_fires": 10})
        assert ok.status_code in (200, 201) and ok.json()["until"] == "it says ready"


@pytest.mark.parametrize(
    ("kind", "expr"), [("at", "2099-01-01T09:00:00"), ("at", "4102444800"), ("every", "90"), ("cron", "*/5 * * * *")]
)
def test_the_three_trigger_forms(tmp_path: Path, kind: str, expr: str) -> None:
    with app_client(scripted("x"), tmp_path) as client:
        made = client.post("/api/schedules", json={"input": "x", "trigger_kind": kind, "trigger_expr": expr})
        assert made.status_code in (200, 201), made.text
        assert made.json()["next_fire"] > time.time()


# --------------------------------------------------------------------------- UI components and bulk data


def test_ui_result_envelopes() -> None:
    assert json.loads(ui_result("kpis", {"items": [1]})) == {"lovia_ui": {"kind": "kpis", "props": {"items": [1]}}}
    assert json.loads(ui_result("table", from_args=True)) == {"lovia_ui": {"kind": "table", "from_args": True}}
    assert json.loads(ui_result("html", from_args="html"))["lovia_ui"]["from_args"] == "html"
    with_data = json.loads(ui_result("table", {"rows": []}, data="ref1"))["lovia_ui"]
    assert with_data == {"kind": "table", "props": {"rows": []}, "data": "ref1"}


async def test_put_ui_data_outside_a_run_is_none() -> None:
    assert await put_ui_data({"rows": [[1]]}) is None


def test_a_tool_returns_a_component(tmp_path: Path) -> None:
    @tool
    def top_products(n: int = 2) -> str:
        """Best sellers, shown to the user as a table."""
        rows = [["sku-1", 10], ["sku-2", 7]][:n]
        return ui_result("table", {"columns": ["sku", "units"], "rows": rows})

    agent = scripted(call("top_products", {"n": 2}), "see the table", tools=[top_products])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "top"})
        sid = first(frames, "session")["session_id"]
        stored = client.get(f"/api/sessions/{sid}").json()
    envelope = json.loads(first(frames, "tool_result")["result"])
    assert envelope == {
        "lovia_ui": {"kind": "table", "props": {"columns": ["sku", "units"], "rows": [["sku-1", 10], ["sku-2", 7]]}}
    }
    tool_message = next(m for m in stored["entries"] if m["role"] == "tool")
    assert "lovia_ui" in json.dumps(tool_message["content"])  # it draws again when the chat is reopened


def test_too_much_ui_data_is_a_tool_error(tmp_path: Path) -> None:
    @tool
    async def huge() -> str:
        """Too much data."""
        ref = await put_ui_data({"blob": "x" * (9 * 1024 * 1024)})
        return ui_result("table", {"rows": []}, data=ref)

    agent = scripted(call("huge", {}), "narrowed", tools=[huge])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "all of it"})
    assert first(frames, "tool_result")["is_error"] is True
    assert first(frames, "done")["output"] == "narrowed"


# --------------------------------------------------------------------------- follow-up suggestions


def test_a_followup_suggester_of_your_own(tmp_path: Path) -> None:
    seen: list[FollowupRequest] = []

    async def pricing_only(request: FollowupRequest) -> list[str]:
        seen.append(request)
        return ["What does the team plan cost?", "Is there a discount?"]

    with app_client(scripted("We have three plans."), tmp_path, followups=pricing_only) as client:
        sid = client.post("/api/chat", json={"message": "pricing?"}).json()["session_id"]
        answer = client.post(f"/api/sessions/{sid}/followups")
    assert answer.json() == {"followups": ["What does the team plan cost?", "Is there a discount?"]}
    request = seen[0]
    assert request.session_id == sid and request.agent == "bot"
    assert [m.role for m in request.messages][:2] == ["user", "assistant"]


def test_a_raising_suggester_degrades_to_nothing(tmp_path: Path) -> None:
    async def broken(request: FollowupRequest) -> list[str]:
        raise RuntimeError("vector store down")

    with app_client(scripted("x"), tmp_path, followups=broken) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        assert client.post(f"/api/sessions/{sid}/followups").json() == {"followups": []}


def test_the_built_in_suggester_on_its_own_model(tmp_path: Path) -> None:
    small = ScriptedProvider([text('["How do refunds work?", "Can I pause my plan?"]')])
    with app_client(scripted("Plans are monthly."), tmp_path, followups=True, followup_model=small) as client:
        sid = client.post("/api/chat", json={"message": "how are plans billed?"}).json()["session_id"]
        answer = client.post(f"/api/sessions/{sid}/followups").json()["followups"]
    assert answer == ["How do refunds work?", "Can I pause my plan?"]


async def test_generate_followups_directly() -> None:
    from lovia import Message

    request = FollowupRequest(
        session_id="s",
        agent="bot",
        messages=[Message(role="user", content="hi"), Message(role="assistant", content="hello")],
    )
    model = ScriptedProvider([text('["Ask only about pricing?"]')])
    found = await generate_followups(request, model=model, instructions="Ask only about pricing.")
    assert found == ["Ask only about pricing?"]


# --------------------------------------------------------------------------- subagents


def test_subagent_runs_record_their_source(tmp_path: Path) -> None:
    sources: list[str] = []

    def run_deps(trigger: RunTrigger) -> None:
        sources.append(trigger.source)

    helper = Agent(name="helper", model=ScriptedProvider([text("the sums are 42")]))
    lead = Agent(
        name="lead",
        model=ScriptedProvider([call("spawn_subagent", {"prompt": "do the sums"}), "started a helper", "it reported"]),
        plugins=[Subagents(agents=[helper])],
    )
    with app_client(lead, tmp_path, run_deps=run_deps) as client:
        parent = client.post("/api/chat", json={"message": "delegate", "context": {"kb": "math"}}).json()["session_id"]
        history = wait_until(
            lambda: (
                [
                    r
                    for r in client.get("/api/runs/history").json()["runs"]
                    if r["source"].startswith("subagent-report:")
                ]
                and client.get("/api/runs/history").json()["runs"]
            ),
            timeout=20,
        )
        wait_until(lambda: client.get("/api/runs").json() == [], timeout=20)
    by_source = {r["source"]: r for r in history}
    assert f"subagent:{parent}" in by_source
    child = by_source[f"subagent:{parent}"]
    assert child["session_id"] != parent
    report = next(r for s, r in by_source.items() if s.startswith("subagent-report:"))
    assert report["session_id"] == parent
    assert sources[0] == "user" and f"subagent:{parent}" in sources
    assert any(s.startswith("subagent-report:") for s in sources)
