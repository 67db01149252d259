"""Follow-up suggestions: ``POST /api/sessions/{id}/followups`` on a real server, and the parser behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent
from lovia.messages import Message
from lovia.testing import ScriptedProvider, fail, text
from lovia.transcript import TranscriptEntry
from lovia.web import FollowupRequest, create_app, generate_followups
from lovia.web.followups import coerce_suggestions, parse_followups

from .helpers import ThreadServer, scripted_agent


class Suggester:
    """A scripted side model: answers every call with ``reply`` (or raises it) and keeps the prompts."""

    def __init__(self, reply: str | BaseException) -> None:
        self.reply = reply
        self.prompts: list[str] = []
        self.provider = ScriptedProvider(self._turn)

    def _turn(self, entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        self.prompts.append(str(getattr(entries[-1], "content", "")))
        if isinstance(self.reply, BaseException):
            return fail(self.reply)
        return text(self.reply)


def _chat(url: str, message: str) -> str:
    r = httpx.post(url + "/api/chat", json={"message": message}, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["session_id"])


def _entries(url: str, sid: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{url}/api/sessions/{sid}").json()["transcript"])


def test_suggestions_from_the_finished_chat(tmp_path: Path) -> None:
    side = Suggester('Sure:\n```json\n["How do I export it?", "Can it run nightly?", "How do I export it?"]\n```')
    app = create_app(scripted_agent(), db_path=str(tmp_path / "f.db"), followups=True, followup_model=side.provider)
    with ThreadServer(app) as srv:
        sid = _chat(srv.url, "tell me about reports")
        before = _entries(srv.url, sid)
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/followups")
        assert r.status_code == 200, r.text
        assert r.json() == {"followups": ["How do I export it?", "Can it run nightly?"]}
        assert len(side.prompts) == 1
        assert "USER: tell me about reports" in side.prompts[0]
        assert "ASSISTANT: You said: tell me about reports" in side.prompts[0]
        assert _entries(srv.url, sid) == before  # the side call never enters the chat
        missing = httpx.post(f"{srv.url}/api/sessions/chat_nope/followups")
        assert missing.status_code == 404
        assert missing.json()["detail"]["code"] == "session_not_found" and missing.json()["detail"]["hint"]
        fresh = httpx.post(srv.url + "/api/sessions", json={}).json()["id"]  # a chat with no messages yet
        assert httpx.post(f"{srv.url}/api/sessions/{fresh}/followups").json() == {"followups": []}
        assert len(side.prompts) == 1  # nothing to suggest from: no model call


@pytest.mark.parametrize(
    "reply",
    [
        "{not json at all",
        "I think the user might ask about pricing.",
        '{"followups": "one string, not a list"}',
        '["", 3, null, {"q": "nested"}]',
        RuntimeError("side model down"),
    ],
)
def test_unusable_answers_give_an_empty_list(tmp_path: Path, reply: str | BaseException) -> None:
    side = Suggester(reply)
    app = create_app(scripted_agent(), db_path=str(tmp_path / "f.db"), followups=True, followup_model=side.provider)
    with ThreadServer(app) as srv:
        sid = _chat(srv.url, "hello")
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/followups")
        assert r.status_code == 200 and r.json() == {"followups": []}, r.text
        assert len(side.prompts) >= 1  # the model was asked; its answer was the problem


def test_off_by_default_and_custom_suggesters(tmp_path: Path) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "a.db"))) as srv:
        sid = _chat(srv.url, "hello")
        assert httpx.post(f"{srv.url}/api/sessions/{sid}/followups").json() == {"followups": []}
        assert httpx.post(f"{srv.url}/api/sessions/nope/followups").status_code == 404  # still checked when off

    seen: list[FollowupRequest] = []

    async def faq(request: FollowupRequest) -> list[str]:
        seen.append(request)
        return ["What does it cost?", "  What   does it cost?  ", "", "Is there a trial?"]

    with ThreadServer(create_app(scripted_agent(name="bot"), db_path=str(tmp_path / "b.db"), followups=faq)) as srv:
        sid = _chat(srv.url, "pricing please")
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/followups")
        assert r.json() == {"followups": ["What does it cost?", "Is there a trial?"]}
        assert seen[0].session_id == sid and seen[0].agent == "bot"
        assert [(m.role, m.text) for m in seen[0].messages] == [
            ("user", "pricing please"),
            ("assistant", "You said: pricing please"),
        ]

    async def broken(_request: FollowupRequest) -> list[str]:
        raise ValueError("the FAQ index is down")

    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "c.db"), followups=broken)) as srv:
        sid = _chat(srv.url, "hello")
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/followups")
        assert r.status_code == 200 and r.json() == {"followups": []}


def test_the_agents_own_model_when_no_followup_model_is_given(tmp_path: Path) -> None:
    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said = str(getattr(entries[-1], "content", ""))
        if said.startswith("The conversation so far"):
            return text('{"followups": ["And in winter?"]}')
        return text("It is sunny.")

    agent: Agent[Any] = Agent(name="weather", model=ScriptedProvider(script))
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "w.db"), followups=True)) as srv:
        sid = _chat(srv.url, "weather in Oslo?")
        assert httpx.post(f"{srv.url}/api/sessions/{sid}/followups").json() == {"followups": ["And in winter?"]}


def test_token_and_origin_guards_cover_followups(tmp_path: Path) -> None:
    side = Suggester('["Next?"]')
    app = create_app(
        scripted_agent(), db_path=str(tmp_path / "g.db"), followups=True, followup_model=side.provider, token="f0"
    )
    auth = {"Authorization": "Bearer f0"}
    with ThreadServer(app) as srv:
        r = httpx.post(srv.url + "/api/chat", json={"message": "hi"}, headers=auth, timeout=30)
        sid = r.json()["session_id"]
        url = f"{srv.url}/api/sessions/{sid}/followups"
        for headers in ({}, {"Authorization": "Bearer nope"}):
            denied = httpx.post(url, headers=headers)
            assert denied.status_code == 401 and denied.json()["detail"]["code"] == "server_token"
        cross = httpx.post(url, headers={**auth, "Origin": "http://evil.test"})
        assert cross.status_code == 403 and cross.json()["detail"]["code"] == "cross_origin"
        foreign = httpx.post(url, headers={**auth, "Host": "evil.test"})
        assert foreign.status_code == 421 and foreign.json()["detail"]["code"] == "host_not_allowed"
        assert side.prompts == []  # nothing refused reached the model
        assert httpx.post(url, headers={**auth, "Origin": srv.url}).json() == {"followups": ["Next?"]}


def test_parse_and_coerce() -> None:
    assert parse_followups('["a?", "b?", "c?", "d?"]') == ["a?", "b?", "c?"]
    assert parse_followups('["a?", "b?"]', limit=1) == ["a?"] and parse_followups('["a?"]', limit=0) == []
    assert parse_followups('{"questions": ["Why?"]}') == ["Why?"]
    assert parse_followups("Ideas:\n1. How fast is it?\n- 'Is it free?'\n* \n") == ["How fast is it?", "Is it free?"]
    assert parse_followups("[broken json") == [] and parse_followups("") == []
    assert parse_followups('["' + "x" * 201 + '", "ok?"]') == ["ok?"]
    assert coerce_suggestions("not a list") == [] and coerce_suggestions(["a", "A", 1]) == ["a"]


async def test_generate_followups_sees_only_user_and_assistant_text() -> None:
    side = Suggester('["What next?"]')
    messages = [
        Message(role="system", content="secret system prompt"),
        Message(role="user", content="question one"),
        Message(role="tool", content="raw tool output", tool_call_id="c1"),
        Message(role="assistant", content="answer one"),
    ]
    request = FollowupRequest(session_id="s", agent="a", messages=messages)
    assert await generate_followups(request, model=side.provider, instructions="Only pricing.") == ["What next?"]
    prompt = side.prompts[0]
    assert "USER: question one" in prompt and "ASSISTANT: answer one" in prompt
    assert "secret system prompt" not in prompt and "raw tool output" not in prompt
    system = side.provider.calls[0][0]
    assert system.role == "system" and "Only pricing." in system.text
    empty = FollowupRequest(session_id="s", agent="a", messages=[Message(role="user", content="  ")])
    assert await generate_followups(empty, model=side.provider) == [] and len(side.prompts) == 1


def test_lovia_web_turns_suggestions_on_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.web.command import resolve_followups

    monkeypatch.delenv("LOVIA_FOLLOWUPS", raising=False)
    assert resolve_followups(False) is True and resolve_followups(True) is False
    for off in ("0", "false", " OFF ", "no"):
        monkeypatch.setenv("LOVIA_FOLLOWUPS", off)
        assert resolve_followups(False) is False, off
    monkeypatch.setenv("LOVIA_FOLLOWUPS", "1")
    assert resolve_followups(False) is True and resolve_followups(True) is False


async def test_the_suggester_is_offered_no_tool_to_spend_its_turn_on() -> None:
    offered: list[list[str]] = []

    def tool_happy(_entries: list[TranscriptEntry], tools: list[Any]) -> Any:
        offered.append([t.name for t in tools])
        if tools:  # a model that calls whatever it is given, as some local models do
            from lovia.testing import call

            return call(tools[0].name, {"ref": "r1:0"})
        return text("1. What next?\n2. Why so?")

    request = FollowupRequest(
        session_id="s",
        agent="a",
        messages=[Message(role="user", content="hi"), Message(role="assistant", content="hello")],
    )
    got = await generate_followups(request, model=ScriptedProvider(tool_happy))
    assert offered == [[]]
    assert got == ["What next?", "Why so?"]
