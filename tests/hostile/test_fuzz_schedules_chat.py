"""No input makes the schedule or chat routes answer 5xx: a hypothesis fuzz over real HTTP.

Bodies mix every JSON shape with the values an attacker reaches for first: ``nan`` and ``inf``
(as JSON literals and as strings), integers far past 64 bits, control characters, path-like chat
ids and cron lines that never match. A refused body is a 4xx; an accepted schedule is stored with
finite, bounded fields, so the list that shows it still answers.

The example count is small so the file runs in seconds; ``LOVIA_FUZZ_EXAMPLES=2000`` runs longer.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lovia.web import create_app
from lovia.web.ids import chat_id_error
from tests.web.helpers import ThreadServer, scripted_agent

EXAMPLES = int(os.environ.get("LOVIA_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=EXAMPLES <= 40,  # CI runs the same examples every time; a long run explores
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

NASTY_TEXT = st.sampled_from(
    ["nan", "NaN", "inf", "-inf", "1e400", "-1", "0", "0.0000001", "1e-320", "5e-324", "9" * 40, "", " "]
    + ["..", "/tmp/x", "a/../../b"]
    + ["a\x00b", "@daily", "0 0 31 2 *", "0 0 L * *", "* * * * * * * *", "61 * * * *", "2026-13-45T99:99", "x" * 300]
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([10**30, -(10**30), 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
)
LEAF = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=20), NASTY_TEXT)
JSON = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
FIELD = st.one_of(NASTY_TEXT, NUMBERS, JSON)


def _body(fields: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A body with any subset of ``fields`` (each value from its own strategy or any JSON)."""
    return st.fixed_dictionaries({}, optional={name: st.one_of(value, FIELD) for name, value in fields.items()})


SCHEDULE = _body(
    {
        "input": st.text(max_size=30),
        "agent": st.sampled_from(["fuzz", "nobody"]),
        "session_id": st.sampled_from(["chat_fuzz", "nope"]),
        "trigger_kind": st.sampled_from(["at", "every", "cron", "weekly"]),
        "trigger_expr": st.one_of(NASTY_TEXT, st.text(max_size=30)),
        "until": st.text(max_size=30),
        "max_fires": NUMBERS,
        "expires_at": NUMBERS,
        "context": JSON,
        "active": st.booleans(),
    }
)
CHAT = _body(
    {
        "message": st.text(max_size=20),
        "session_id": st.one_of(st.sampled_from(["chat_fuzz"]), NASTY_TEXT),
        "agent": st.sampled_from(["fuzz", "nobody"]),
        "attachments": st.lists(st.one_of(st.text(max_size=10), JSON), max_size=3),
        "context": JSON,
        "id": NUMBERS,
        "call_id": st.text(max_size=10),
        "decision": st.sampled_from(["approve", "deny", "maybe"]),
        "answer": st.text(max_size=10),
    }
)
CHAT_POSTS = ["/api/chat", "/api/chat/inject", "/api/chat/uninject", "/api/chat/approve", "/api/chat/answer"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    app = create_app(scripted_agent(name="fuzz"), db_path=str(folder / "web.db"), scheduler_poll=3600)
    with ThreadServer(app) as srv:
        made = httpx.post(f"{srv.url}/api/chat", json={"message": "hi", "session_id": "chat_fuzz"}, timeout=60)
        assert made.status_code == 200, made.text
        yield srv.url


def _post(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    content = json.dumps(body, allow_nan=True)  # NaN and Infinity go out as the JSON literals
    return client.post(path, content=content, headers={"Content-Type": "application/json"})


def _finite_rows(client: httpx.Client) -> None:
    listed = client.get("/api/schedules")
    assert listed.status_code == 200, listed.text
    for row in listed.json():
        for key in ("next_fire", "expires_at", "max_fires"):
            value = row.get(key)
            assert value is None or (math.isfinite(value) and 0 <= value <= 253_402_300_799), (key, row)


@FUZZ
@given(create=SCHEDULE, patch=SCHEDULE)
@example(create={"input": "x", "trigger_kind": "every", "trigger_expr": "60", "max_fires": 10**30}, patch={})
@example(create={"input": "x", "trigger_kind": "every", "trigger_expr": "60"}, patch={"expires_at": float("nan")})
def test_no_schedule_body_makes_a_5xx(server: str, create: dict[str, Any], patch: dict[str, Any]) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        made = _post(client, "/api/schedules", create)
        assert made.status_code < 500, (create, made.text)
        if made.status_code == 200:
            schedule_id = made.json()["id"]
            patched = client.patch(
                f"/api/schedules/{schedule_id}",
                content=json.dumps(patch, allow_nan=True),
                headers={"Content-Type": "application/json"},
            )
            assert patched.status_code < 500, (patch, patched.text)
            _finite_rows(client)
            assert client.delete(f"/api/schedules/{schedule_id}").status_code == 200


@FUZZ
@given(path=st.sampled_from(CHAT_POSTS), body=CHAT, sid=st.one_of(NASTY_TEXT, st.text(max_size=12)))
@example(path="/api/chat", body={"message": "hi", "session_id": "/tmp/x"}, sid="..")
def test_no_chat_body_or_chat_id_makes_a_5xx(server: str, path: str, body: dict[str, Any], sid: str) -> None:
    """No 5xx, and a chat id outside the rule is never taken (422 whatever else the body holds)."""
    with httpx.Client(base_url=server, timeout=60) as client:
        answer = _post(client, path, body)
        assert answer.status_code < 500 or answer.status_code == 501, (
            path,
            body,
            answer.text,
        )  # 501: no question channel
        if isinstance(body.get("session_id"), str) and chat_id_error(body["session_id"]) is not None:
            assert answer.status_code == 422, (path, body, answer.text)
        for method, route in (
            ("POST", "/api/chat/cancel"),
            ("GET", "/api/chat/question"),
            ("GET", "/api/schedules"),
            ("POST", "/api/chat/reconnect"),
        ):
            answer = client.request(method, route, params={"session_id": sid})
            assert answer.status_code < 500 or answer.status_code == 501, (route, sid, answer.text)
            if sid and chat_id_error(sid) is not None:
                assert answer.status_code == 422, (route, sid, answer.text)


@pytest.mark.parametrize(
    "body",
    [
        {"input": "x", "trigger_kind": "at", "trigger_expr": "nan"},
        {"input": "x", "trigger_kind": "at", "trigger_expr": "inf"},
        {"input": "x", "trigger_kind": "every", "trigger_expr": "60", "max_fires": 10**30},
        {"input": "x", "trigger_kind": "every", "trigger_expr": "60", "expires_at": float("nan")},
        {"input": "x", "trigger_kind": "every", "trigger_expr": "60", "expires_at": float("inf")},
        {"input": "x", "trigger_kind": "every", "trigger_expr": "1e400"},
        {"input": "x", "trigger_kind": "cron", "trigger_expr": "0 0 31 2 *"},
    ],
)
def test_the_campaigns_schedule_bodies_are_422_with_a_clear_message(server: str, body: dict[str, Any]) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        answer = _post(client, "/api/schedules", body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"]
        _finite_rows(client)


def test_a_body_nested_5000_deep_is_422(server: str) -> None:
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    with httpx.Client(base_url=server, timeout=30) as client:
        for path, start in (
            ("/api/schedules", '{"input": "x", "context": '),
            ("/api/chat", '{"message": "x", "context": '),
        ):
            answer = client.post(path, content=start + deep + "}", headers={"Content-Type": "application/json"})
            assert answer.status_code == 422, (path, answer.text)
            assert "nested too deeply" in answer.text


@FUZZ
@given(sid=st.one_of(NASTY_TEXT, st.text(min_size=1, max_size=20)).filter(bool), body=JSON)
@example(sid="..", body={})
def test_no_chat_id_in_a_path_makes_a_5xx(server: str, sid: str, body: Any) -> None:
    """Every ``/api/sessions/{id}/...`` route: no 5xx, and an id outside the rule is 422 when it reaches the route."""
    with httpx.Client(base_url=server, timeout=60) as client:
        base = f"/api/sessions/{quote(sid, safe='')}"
        for method, route in (
            ("GET", ""),
            ("PATCH", ""),
            ("GET", "/uploads"),
            ("POST", "/uploads"),
            ("POST", "/fork"),
            ("GET", "/export"),
            ("GET", "/children"),
            ("POST", "/rewind"),
            ("GET", "/processes"),
        ):
            content = b"x" if route == "/uploads" else json.dumps(body, allow_nan=True).encode()
            headers = {"Content-Type": "application/json", "X-Filename": "a.txt"}
            answer = client.request(method, base + route, content=content, headers=headers)
            assert answer.status_code < 500 or answer.status_code == 501, (method, route, sid, answer.text)
            if "/" not in sid and sid not in (".", "..") and chat_id_error(sid) is not None:
                assert answer.status_code in (405, 422), (method, route, sid, answer.text)
