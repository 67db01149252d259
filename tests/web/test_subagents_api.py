"""Background subagents under web supervision: child chats, their origin, children, report delivery."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import ThreadServer, sse, wait_for
from .subagent_helpers import delegating_agent


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def server(db: str, release: threading.Event) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(delegating_agent(release), db_path=db)) as srv:
        yield srv


def _children(base: str, sid: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{base}/api/sessions/{sid}/children")
    assert r.status_code == 200, r.text
    return list(r.json()["children"])


def _texts(base: str, sid: str) -> list[str]:
    entries = httpx.get(f"{base}/api/sessions/{sid}").json()["transcript"]
    return [e["content"] for e in entries if e["type"] == "assistant_text"]


def test_child_runs_in_its_own_chat_and_reports_back(server: ThreadServer, release: threading.Event) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "delegate the sums"})
    assert first.text() == "I started a helper on it."
    parent = first.of("session")[0]["session_id"]
    (child,) = wait_for(lambda: _children(server.url, parent))
    assert child["kind"] == "subagent" and child["live"] and child["status"] == "running"
    assert child["title"] == "job the sums"
    detail = httpx.get(f"{server.url}/api/sessions/{child['id']}").json()
    assert detail["live"] is True
    assert detail["origin"] is None and detail["parent_id"] == parent
    assert detail["task_of"] == {
        "kind": "subagent",
        "session_id": parent,
        "user_turn": None,
        "ref": None,
        "title": "delegate the sums",
        "exists": True,
    }
    # The child's run streams in its own chat like any other.
    follow = sse(server.url, f"/api/chat/reconnect?session_id={child['id']}", None, until="tool_call")
    assert follow.of("snapshot")[0]["status"] == "running"
    release.set()
    wait_for(lambda: _children(server.url, parent)[0]["status"] == "completed", timeout=30)
    assert _texts(server.url, child["id"]) == ["Child finished: job the sums."]
    # Its report started a run of the idle parent chat.
    wait_for(lambda: "The helper reported back." in _texts(server.url, parent), timeout=30)
    inputs = [
        e["content"]
        for e in httpx.get(f"{server.url}/api/sessions/{parent}").json()["transcript"]
        if e["type"] == "input"
    ]
    assert inputs[-1].startswith('<subagent-report id="t1"') and "Child finished: job the sums." in inputs[-1]
    # A task chat is listed under its parent, not in the chat list; it has no children of its own.
    assert child["id"] not in [s["id"] for s in httpx.get(f"{server.url}/api/sessions").json()]
    assert httpx.get(f"{server.url}/api/sessions/{child['id']}").status_code == 200
    assert _children(server.url, child["id"]) == []


def test_a_report_reaches_a_live_parent_exactly_once(server: ThreadServer, release: threading.Event) -> None:
    release.set()  # the child finishes while the parent run waits for it
    parent = sse(server.url, "/api/chat/stream", {"message": "delegate and wait"}).of("session")[0]["session_id"]
    wait_for(lambda: "The helper reported back." in _texts(server.url, parent), timeout=30)
    wait_for(lambda: httpx.get(f"{server.url}/api/runs").json() == [], timeout=30)
    entries = httpx.get(f"{server.url}/api/sessions/{parent}").json()["transcript"]
    reports = [e for e in entries if e["type"] == "input" and str(e["content"]).startswith("<subagent-report")]
    assert len(reports) == 1 and "Child finished: job quick." in reports[0]["content"]


def test_deleting_the_parent_stops_and_deletes_its_tasks(server: ThreadServer) -> None:
    parent = sse(server.url, "/api/chat/stream", {"message": "delegate forever"}).of("session")[0]["session_id"]
    (child,) = wait_for(lambda: _children(server.url, parent))
    assert child["live"]
    assert httpx.delete(f"{server.url}/api/sessions/{parent}", timeout=30).status_code == 200
    assert httpx.get(f"{server.url}/api/sessions/{child['id']}").json()["entries"] == []  # gone
    assert httpx.get(f"{server.url}/api/runs").json() == []
    missing = httpx.get(f"{server.url}/api/sessions/{parent}/children")
    assert missing.status_code == 404 and missing.json()["detail"]["code"] == "session_not_found"


def test_cancel_subagent_stops_the_task_chat_without_a_report(server: ThreadServer) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "spawn and cancel"})
    assert first.text() == "Cancelled it."
    parent = first.of("session")[0]["session_id"]
    (child,) = wait_for(lambda: _children(server.url, parent))
    wait_for(lambda: _children(server.url, parent)[0]["status"] == "cancelled", timeout=30)
    assert httpx.get(f"{server.url}/api/runs").json() == []
    parent_runs = httpx.get(f"{server.url}/api/runs/history", params={"session_id": parent}).json()["runs"]
    assert len(parent_runs) == 1  # no report, so no second run of the parent
    assert _texts(server.url, parent) == ["Cancelled it."]


def test_at_the_run_cap_the_spawn_fails_and_leaves_no_chat(db: str, release: threading.Event) -> None:
    with ThreadServer(create_app(delegating_agent(release), db_path=db, max_background_runs=1)) as srv:
        first = sse(srv.url, "/api/chat/stream", {"message": "delegate too much"})
        parent = first.of("session")[0]["session_id"]

        def report() -> str | None:
            inputs = [str(e["content"]) for e in _detail_transcript(srv.url, parent) if e["type"] == "input"]
            return next((i for i in inputs if i.startswith("<subagent-report")), None)

        failed = wait_for(report, timeout=30)  # delivered once the parent's run freed the slot
        assert 'status="failed"' in failed and "TooManyRuns" in failed
        assert _children(srv.url, parent) == []
        assert [s["id"] for s in httpx.get(f"{srv.url}/api/sessions").json()] == [parent]


def _detail_transcript(base: str, sid: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{base}/api/sessions/{sid}").json()["transcript"])


def test_wiring_can_be_turned_off(db: str, release: threading.Event) -> None:
    with ThreadServer(create_app(delegating_agent(release), db_path=db, wire_subagents=False)) as srv:
        release.set()  # bounded mode: the child runs inside the parent's run, in no chat of its own
        parent = sse(srv.url, "/api/chat/stream", {"message": "delegate inline"}).of("session")[0]["session_id"]
        assert _children(srv.url, parent) == []
        assert len(httpx.get(f"{srv.url}/api/sessions").json()) == 1


def _args(*argv: str) -> Any:
    from lovia.cli import build_parser

    return build_parser().parse_args(["web", *argv])


def test_the_built_in_agent_gets_subagents_unless_told_not_to() -> None:
    from lovia.plugins.subagents import Subagents
    from lovia.web.builder import build_default_agent

    agent = build_default_agent(_args("--no-workspace"), None, "openai:gpt-4o-mini")
    assert sum(isinstance(p, Subagents) for p in agent.plugins) == 1
    bare = build_default_agent(_args("--no-workspace", "--no-subagents"), None, "openai:gpt-4o-mini")
    assert not any(isinstance(p, Subagents) for p in bare.plugins)


def test_a_swapped_in_agent_is_wired_too(db: str, release: threading.Event) -> None:
    from lovia.web import ChatStore
    from lovia.web.api import RouterDeps
    from lovia.web.subagents import rewire_subagents, wire_subagents

    store = ChatStore.sqlite(db)
    first, second = delegating_agent(release), delegating_agent(release)
    deps = RouterDeps(agents={"lead": first}, store=store)
    assert rewire_subagents(deps) == 0  # never wired: a swap does not start wiring
    assert wire_subagents(deps) == 1
    deps.supervisor.agents["lead"] = second  # what a model switch does
    assert rewire_subagents(deps) == 1 and second.plugins[0].run_child is not None
    assert rewire_subagents(deps) == 0  # already wired


def test_no_wiring_on_a_store_without_origins(release: threading.Event) -> None:
    from lovia.web import ChatStore
    from lovia.web.api import RouterDeps
    from lovia.web.subagents import wire_subagents

    class Unlinked(ChatStore):
        @property
        def supports_origins(self) -> bool:
            return False

    base = ChatStore.in_memory()
    store = Unlinked(base.session, checkpointer=base.checkpointer, meta_path=":memory:")
    agent = delegating_agent(release)
    assert wire_subagents(RouterDeps(agents={agent.name: agent}, store=store)) == 0
    assert agent.plugins[0].run_child is None  # bounded mode: children stay inside the parent run


def test_postgres_stores_wire_the_children_too(release: threading.Event) -> None:
    from lovia.web.api import RouterDeps
    from lovia.web.store import PostgresChatStore
    from lovia.web.subagents import wire_subagents

    agent = delegating_agent(release)  # no connection is made: wiring only asks the store what it supports
    deps = RouterDeps(agents={agent.name: agent}, store=PostgresChatStore("postgresql://127.0.0.1/test"))
    assert wire_subagents(deps) == 1
    assert agent.plugins[0].run_child is not None
