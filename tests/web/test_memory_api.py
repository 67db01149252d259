"""The Memory notes over HTTP: ``GET`` / ``PUT /api/memory`` and ``POST /api/memory/dream``, on a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI

from lovia import Agent
from lovia.plugins.memory import Memory
from lovia.testing import ScriptedProvider, text
from lovia.transcript import TranscriptEntry
from lovia.web import ChatStore, create_app
from lovia.web.api import RouterDeps, build_api_router
from lovia.web.auth import HostOriginGuard, HostPolicy, token_dependency

from .helpers import ThreadServer, scripted_agent

BODY = "- Prefers tea over coffee\n- [2025-01] Lives in Oslo\nnot a bullet, ignored\n* [2025-01] lives in oslo\n"
"""Two notes once normalized: the third bullet repeats the second, the plain line is dropped."""


class Dreamer:
    """A scripted model for the dream call: answers with ``reply`` and counts its calls."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list[str] = []
        self.provider = ScriptedProvider(self._turn)

    def _turn(self, entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        self.prompts.append(str(getattr(entries[-1], "content", "")))
        return text(self.reply)


def _agents(root: Path, dreamer: Dreamer, *, budget: int = 8000, plugin_model: bool = False) -> dict[str, Agent[Any]]:
    memory = Memory(
        root,
        index=None,
        auto_curate=False,
        notes_budget=budget,
        dream_every_days=None,
        model=dreamer.provider if plugin_model else None,
    )
    keeper: Agent[Any] = Agent(
        name="keeper", model=None if plugin_model else dreamer.provider, plugins=[memory], instructions="hi"
    )
    return {"keeper": keeper, "plain": scripted_agent(name="plain")}


def _used(content: str) -> int:
    return sum(len(line[2:]) + 3 for line in content.splitlines() if line.startswith("- "))


def test_read_replace_and_read_back_after_a_restart(tmp_path: Path) -> None:
    db, root = str(tmp_path / "m.db"), tmp_path / "memory"
    with ThreadServer(create_app(_agents(root, Dreamer("{}")), db_path=db)) as srv:
        unnamed = httpx.get(srv.url + "/api/memory")  # two agents are served: whose notes?
        assert unnamed.status_code == 400 and unnamed.json()["detail"]["code"] == "invalid_request"
        empty = httpx.get(srv.url + "/api/memory?agent=keeper")
        assert empty.status_code == 200
        assert empty.json() == {"content": "", "used": 0, "budget": 8000, "dreamed_at": None}
        put = httpx.put(srv.url + "/api/memory", params={"agent": "keeper"}, json={"content": BODY})
        assert put.status_code == 200, put.text
        saved = put.json()
        lines = saved["content"].splitlines()
        assert len(lines) == 2 and lines[0].endswith("] Prefers tea over coffee") and lines[0].startswith("- [20")
        assert lines[1] == "- [2025-01] Lives in Oslo"
        assert saved["used"] == _used(saved["content"]) > 0 and saved["budget"] == 8000
        assert (root / "MEMORY.md").read_text(encoding="utf-8") == saved["content"]
        assert httpx.get(srv.url + "/api/memory?agent=keeper").json() == saved
    # a new app on the same store and memory folder (a new Memory object): the notes are still there
    dreamer = Dreamer("{}")
    with ThreadServer(create_app(_agents(root, dreamer), db_path=db)) as again:
        back = httpx.get(again.url + "/api/memory", params={"agent": "keeper"})
        assert back.status_code == 200 and back.json() == saved
        cleared = httpx.put(again.url + "/api/memory?agent=keeper", json={"content": "no bullets at all"})
        assert cleared.json()["content"] == "" and cleared.json()["used"] == 0
    assert dreamer.prompts == []  # reading and replacing never calls a model


def test_over_budget_and_bad_bodies_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    with ThreadServer(create_app(_agents(root, Dreamer("{}"), budget=60), db_path=str(tmp_path / "m.db"))) as srv:
        ok = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": "- [2025-01] short note\n"})
        assert ok.status_code == 200 and ok.json()["used"] == len("[2025-01] short note") + 3
        long = "- " + "x" * 40 + "\n- " + "y" * 40 + "\n"
        over = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": long})
        assert over.status_code == 413
        detail = over.json()["detail"]
        assert detail["code"] == "payload_too_large" and "60" in detail["message"] and detail["hint"]
        # undated notes gain a stamp, and the stamp counts: 48 typed characters still overflow
        stamped = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": "- " + "z" * 48 + "\n"})
        assert stamped.status_code == 413
        kept = httpx.get(srv.url + "/api/memory?agent=keeper").json()
        assert kept["content"] == "- [2025-01] short note\n"  # untouched
        missing = httpx.put(srv.url + "/api/memory?agent=keeper", json={})
        assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "content"]
        wrong = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": 5})
        assert wrong.status_code == 422
        huge = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": "- " + "a" * 1_000_001})
        assert huge.status_code == 422


def test_agents_without_memory_and_unknown_agents(tmp_path: Path) -> None:
    with ThreadServer(create_app(_agents(tmp_path / "memory", Dreamer("{}")), db_path=str(tmp_path / "m.db"))) as srv:
        listed = httpx.get(srv.url + "/api/agents").json()
        assert {a["name"]: a["memory"] for a in listed} == {"keeper": True, "plain": False}
        assert httpx.get(srv.url + "/api/agents/keeper").json()["memory"] is True
        for method, path in (("GET", "/api/memory"), ("PUT", "/api/memory"), ("POST", "/api/memory/dream")):
            body = {"content": "- x"} if method == "PUT" else None
            plain = httpx.request(method, srv.url + path, params={"agent": "plain"}, json=body)
            assert plain.status_code == 404, (method, path)
            detail = plain.json()["detail"]
            assert detail["code"] == "feature_unavailable" and "Memory" in detail["hint"], (method, path)
            unknown = httpx.request(method, srv.url + path, params={"agent": "ghost"}, json=body)
            assert unknown.status_code == 404 and unknown.json()["detail"]["code"] == "agent_not_found"
            assert "keeper" in unknown.json()["detail"]["hint"]
    no_memory = create_app(scripted_agent(), db_path=str(tmp_path / "n.db"))
    with ThreadServer(no_memory) as srv:
        assert httpx.get(srv.url + "/api/memory").json()["detail"]["code"] == "feature_unavailable"


def test_dream_rewrites_with_the_agents_model(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    dreamer = Dreamer(json.dumps({"notes": ["[2025-01] Lives in Oslo", "[2025-03] Prefers tea"]}))
    with ThreadServer(create_app(_agents(root, dreamer), db_path=str(tmp_path / "m.db"))) as srv:
        three = "- [2025-01] Lives in Oslo\n- [2025-02] Likes tea\n- [2025-03] Prefers tea\n"
        assert httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": three}).status_code == 200
        dreamed = httpx.post(srv.url + "/api/memory/dream", params={"agent": "keeper"})
        assert dreamed.status_code == 200, dreamed.text
        out = dreamed.json()
        assert out["before"] == 3 and out["after"] == 2
        assert out["content"] == "- [2025-01] Lives in Oslo\n- [2025-03] Prefers tea\n"
        assert out["used"] == _used(out["content"]) and out["budget"] == 8000
        assert isinstance(out["dreamed_at"], float)
        assert dreamer.prompts and "Likes tea" in dreamer.prompts[0]  # the model saw the old notes
        assert (root / "MEMORY.md.bak").read_text(encoding="utf-8") == three  # one-level undo
        assert httpx.get(srv.url + "/api/memory?agent=keeper").json()["dreamed_at"] == out["dreamed_at"]


def test_dream_with_an_unusable_answer_keeps_the_notes(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    dreamer = Dreamer("sorry, I cannot do JSON today {")
    agents = _agents(root, dreamer, plugin_model=True)  # the plugin's own model, the agent has none
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "m.db"))) as srv:
        body = "- [2025-01] Lives in Oslo\n"
        httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": body})
        kept = httpx.post(srv.url + "/api/memory/dream?agent=keeper")
        assert kept.status_code == 200, kept.text
        assert kept.json()["before"] == kept.json()["after"] == 1
        assert kept.json()["content"] == body and kept.json()["dreamed_at"] is None
        assert len(dreamer.prompts) == 1


def test_dream_without_any_model_is_unavailable(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "memory", index=None, auto_curate=False)
    agent: Agent[Any] = Agent(name="modelless", plugins=[memory])
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "m.db"))) as srv:
        r = httpx.post(srv.url + "/api/memory/dream")
        assert r.status_code == 501 and r.json()["detail"]["code"] == "feature_unavailable"
        assert "model" in r.json()["detail"]["hint"]


def test_token_origin_and_host_guards_cover_the_memory_routes(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    dreamer = Dreamer(json.dumps({"notes": []}))
    app = create_app(_agents(root, dreamer), db_path=str(tmp_path / "m.db"), token="m3m")
    auth = {"Authorization": "Bearer m3m"}
    with ThreadServer(app) as srv:
        for method, path in (("GET", "/api/memory"), ("PUT", "/api/memory"), ("POST", "/api/memory/dream")):
            body = {"content": "- sneaky"} if method == "PUT" else None
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                r = httpx.request(method, srv.url + path, json=body, headers=headers)
                assert r.status_code == 401 and r.json()["detail"]["code"] == "server_token", (method, path)
            foreign = httpx.request(method, srv.url + path, json=body, headers={**auth, "Host": "evil.test"})
            assert foreign.status_code == 421 and foreign.json()["detail"]["code"] == "host_not_allowed"
        for method, path in (("PUT", "/api/memory"), ("POST", "/api/memory/dream")):
            body = {"content": "- sneaky"} if method == "PUT" else None
            cross = httpx.request(method, srv.url + path, json=body, headers={**auth, "Origin": "http://evil.test"})
            assert cross.status_code == 403 and cross.json()["detail"]["code"] == "cross_origin", (method, path)
        read = httpx.get(srv.url + "/api/memory?agent=keeper", headers={**auth, "Origin": "http://evil.test"})
        assert read.status_code == 200 and read.json()["content"] == ""  # a read is not a state change
        own = {**auth, "Origin": srv.url}
        same = httpx.put(srv.url + "/api/memory?agent=keeper", json={"content": "- own page"}, headers=own)
        assert same.status_code == 200 and same.json()["content"].endswith("] own page\n")
    assert dreamer.prompts == []  # no refused dream reached the model
    assert "sneaky" not in (root / "MEMORY.md").read_text(encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> Any:
    chat_store = ChatStore.sqlite(tmp_path / "r.db")
    yield chat_store
    asyncio.run(chat_store.close())


def test_a_bare_mounted_router_serves_memory(tmp_path: Path, store: ChatStore) -> None:
    dreamer = Dreamer(json.dumps({"notes": ["[2025-01] One note"]}))
    deps = RouterDeps(agents=_agents(tmp_path / "memory", dreamer), store=store)
    app = FastAPI(lifespan=deps.lifespan)
    app.add_middleware(HostOriginGuard, policy=HostPolicy())
    app.include_router(build_api_router(deps), prefix="/lovia", dependencies=[Depends(token_dependency("t"))])
    auth = {"Authorization": "Bearer t"}
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url + "/lovia", headers=auth, timeout=10) as http:
        put = http.put("/api/memory?agent=keeper", json={"content": "- [2025-01] one note\n- [2025-01] One note.\n"})
        assert put.status_code == 200 and put.json()["content"] == "- [2025-01] one note\n"
        dream = http.post("/api/memory/dream", params={"agent": "keeper"})
        assert dream.json()["content"] == "- [2025-01] One note\n" and dream.json()["after"] == 1
        assert httpx.get(srv.url + "/lovia/api/memory").status_code == 401
        assert http.get("/api/memory", params={"agent": "plain"}).json()["detail"]["code"] == "feature_unavailable"
