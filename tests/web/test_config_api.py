"""``/api/config*`` and the config runtime: real files, real HTTP, real fake endpoints."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import HTTPException, Request

from lovia.exceptions import UserError
from lovia.web import create_app
from lovia.web.command import check_model_flags
from lovia.web.config import (
    Connection,
    ValidationOutcome,
    WebConfig,
    load_active,
    load_config,
    mask_key,
    save_config,
    validate_connection,
)
from lovia.web.config.schema import ModelProfile

from ..providers.servers import Reply
from .config_helpers import Endpoint, config_server, make_runtime, profile, web_args
from .helpers import ThreadServer, free_port, iter_frames, scripted_agent, sse, wait_for

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated HOME and working folder (no real ~/.lovia is read or written)."""
    user = tmp_path / "home"
    project = tmp_path / "project"
    user.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.chdir(project)
    for name in ("LOVIA_MODEL", "LOVIA_MAX_TOKENS", "LOVIA_MAX_RETRIES", "LOVIA_INSTRUCTIONS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def a() -> Iterator[Endpoint]:
    with Endpoint("A", models=[{"id": "m", "max_model_len": 32768}, {"id": "other"}]) as ep:
        yield ep


@pytest.fixture
def b() -> Iterator[Endpoint]:
    with Endpoint("B") as ep:
        yield ep


def detail(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"detail"} and set(body["detail"]) == {"code", "message", "hint"}, body
    return dict(body["detail"])


# --------------------------------------------------------------------------- the document


def test_mask_key_shows_at_most_the_last_four() -> None:
    assert mask_key(KEY) == "…cdef"
    assert mask_key("short") == "…"
    assert mask_key(None) == mask_key("") == ""


def test_the_whole_document_is_validated() -> None:
    ok = {"id": "a", "model": "m"}
    with pytest.raises(ValueError, match="duplicate model id"):
        WebConfig.model_validate({"models": [ok, ok]})
    with pytest.raises(ValueError, match="roles.chat"):
        WebConfig.model_validate({"models": [ok], "roles": {"chat": "missing"}})
    with pytest.raises(ValueError, match="extra_body may not set model"):
        ModelProfile.model_validate({**ok, "extra_body": {"model": "x"}})
    with pytest.raises(ValueError, match="not an http"):
        ModelProfile.model_validate({**ok, "base_url": "ftp://x"})
    config = WebConfig.model_validate({"models": [ok, {"id": "b", "model": "n"}], "roles": {"aux": "b"}})
    assert config.default_profile() is config.models[0] and config.aux_profile() is config.models[1]
    assert config.skills.dirs == [".agents/skills", "~/.agents/skills"]


def test_save_is_atomic_and_owner_only(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = home / "cfg" / ".lovia" / "config.json"
    first = WebConfig.model_validate({"models": [{"id": "a", "model": "m", "api_key": KEY}]})
    assert save_config(first, path) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_config(path) == first
    assert os.listdir(path.parent) == ["config.json"]  # no temporary file left behind

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_config(WebConfig(), path)
    assert load_config(path) == first  # the old document is intact
    assert os.listdir(path.parent) == ["config.json"]


def test_project_file_replaces_the_user_file(home: Path) -> None:
    assert load_active().exists is False
    save_config(WebConfig.model_validate({"models": [{"id": "user", "model": "u"}]}), home / "home/.lovia/config.json")
    assert [m.id for m in load_active().config.models] == ["user"]
    subprocess.run(["git", "init", "-q"], check=True)
    save_config(WebConfig.model_validate({"models": [{"id": "proj", "model": "p"}]}), Path(".lovia/config.json"))
    active = load_active()
    assert active.label == ".lovia/config.json" and [m.id for m in active.config.models] == ["proj"]
    assert ".lovia/" in Path(".gitignore").read_text()  # keys stay out of commits


def test_a_broken_file_is_a_user_error_with_a_hint(home: Path) -> None:
    path = home / "broken.json"
    path.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON") as exc:
        load_config(path)
    assert exc.value.hint
    path.write_text(json.dumps({"models": [{"id": "Bad Id", "model": "m"}]}))
    with pytest.raises(UserError, match="models.0.id"):
        load_config(path)


# --------------------------------------------------------------------------- the probe


def test_probe_outcomes(a: Endpoint) -> None:
    conn = Connection(model="openai:m", base_url=a.url, api_key=KEY)
    outcome, text = validate_connection(conn)
    assert outcome is ValidationOutcome.OK and "'m' listed" in text
    assert conn.available_models == ["m", "other"] and conn.context_window == 32768 and conn.window_from_endpoint
    assert a.server.requests[-1].headers["authorization"] == f"Bearer {KEY}"

    a.server.routes["/v1/models"] = Reply.json(401, {"error": {"message": "bad key"}})
    assert validate_connection(Connection(model="openai:m", base_url=a.url))[0] is ValidationOutcome.AUTH_FAILED
    a.server.routes["/v1/models"] = Reply.text(404, "no")
    assert validate_connection(Connection(model="openai:m", base_url=a.url))[0] is ValidationOutcome.UNVERIFIABLE
    dead = Connection(model="openai:m", base_url=f"http://127.0.0.1:{free_port()}/v1")
    assert validate_connection(dead, timeout=5)[0] is ValidationOutcome.UNREACHABLE
    official = Connection(model="openai:gpt-4.1-mini")
    assert official.missing() == ["api_key"]
    assert validate_connection(official)[0] is ValidationOutcome.UNVERIFIABLE


# --------------------------------------------------------------------------- the routes


@pytest.fixture
def app_a(home: Path, a: Endpoint) -> Iterator[tuple[ThreadServer, Any]]:
    runtime = make_runtime(home, {"models": [profile("a", a, key=KEY)]})
    with config_server(home, runtime) as srv:
        yield srv, runtime


def test_info_reports_the_feature_only_with_a_runtime(home: Path, app_a: tuple[ThreadServer, Any]) -> None:
    srv, _ = app_a
    info = httpx.get(f"{srv.url}/api/info").json()
    assert info["features"]["model_config"] is True and info["configured"] is True
    assert httpx.get(f"{srv.url}/api/agents").json()[0]["model"] == "m"
    with ThreadServer(create_app(scripted_agent(), db_path=str(home / "plain.db"))) as plain:
        assert httpx.get(f"{plain.url}/api/info").json()["features"]["model_config"] is False
        assert httpx.get(f"{plain.url}/api/config").status_code == 404


def test_get_config_never_sends_a_key(app_a: tuple[ThreadServer, Any]) -> None:
    srv, _ = app_a
    response = httpx.get(f"{srv.url}/api/config")
    assert KEY not in response.text
    body = response.json()
    assert body["models"][0]["api_key"] == {"set": True, "hint": "…cdef"}
    assert body["default_model"] == "a" and body["configured"] is True and body["models"][0]["usable"] is True
    assert body["search"]["tavily_api_key"] == {"set": False, "hint": None}


def test_add_model_persists_and_masks(home: Path, app_a: tuple[ThreadServer, Any], b: Endpoint) -> None:
    srv, runtime = app_a
    response = httpx.post(
        f"{srv.url}/api/config/models",
        json={"name": "Local B", "model": "m", "base_url": b.url, "api_key": "sk-b-secret-9876"},
    )
    assert response.status_code == 201, response.text
    assert "sk-b-secret-9876" not in response.text
    added = next(m for m in response.json()["models"] if m["id"] == "local-b")
    assert added["api_key"] == {"set": True, "hint": "…9876"}
    on_disk = json.loads((home / "config.json").read_text())
    assert [m["id"] for m in on_disk["models"]] == ["a", "local-b"] and on_disk["models"][1][
        "api_key"
    ] == "sk-b-secret-9876"
    assert stat.S_IMODE((home / "config.json").stat().st_mode) == 0o600

    again = httpx.post(f"{srv.url}/api/config/models", json={"id": "local-b", "model": "x"})
    assert again.status_code == 409 and detail(again)["code"] == "model_exists"
    assert runtime.config.models[-1].id == "local-b"  # nothing changed


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"model": "m", "extra_body": {"messages": []}}, "extra_body may not set messages"),
        ({"model": "m", "base_url": "not a url"}, "base_url"),
    ],
)
def test_bad_profiles_are_422_with_our_body(app_a: tuple[ThreadServer, Any], body: dict[str, Any], needle: str) -> None:
    srv, _ = app_a
    response = httpx.post(f"{srv.url}/api/config/models", json=body)
    assert response.status_code == 422
    err = detail(response)
    assert err["code"] == "invalid_request" and needle in err["message"] and err["hint"]


def test_request_shape_errors_are_fastapis_422(app_a: tuple[ThreadServer, Any]) -> None:
    srv, _ = app_a
    response = httpx.post(f"{srv.url}/api/config/models", json={"name": "no model", "api_key": KEY})
    assert response.status_code == 422 and isinstance(response.json()["detail"], list)
    assert KEY not in response.text  # rejected input is not echoed back


def test_edit_keeps_or_clears_the_key(app_a: tuple[ThreadServer, Any], a: Endpoint) -> None:
    srv, runtime = app_a
    keep = httpx.put(f"{srv.url}/api/config/models/a", json={"model": "m", "base_url": a.url, "name": "Renamed"})
    assert keep.status_code == 200, keep.text
    assert runtime.config.models[0].api_key == KEY and runtime.config.models[0].name == "Renamed"
    clear = httpx.put(f"{srv.url}/api/config/models/a", json={"model": "m", "base_url": a.url, "api_key": ""})
    assert clear.json()["models"][0]["api_key"] == {"set": False, "hint": None}
    assert runtime.config.models[0].api_key is None

    missing = httpx.put(f"{srv.url}/api/config/models/nope", json={"model": "m"})
    assert missing.status_code == 404 and detail(missing)["code"] == "model_not_found"
    renamed = httpx.put(f"{srv.url}/api/config/models/a", json={"id": "b", "model": "m"})
    assert renamed.status_code == 422 and detail(renamed)["code"] == "invalid_request"


def test_an_official_chat_profile_without_a_key_is_refused(app_a: tuple[ThreadServer, Any]) -> None:
    srv, runtime = app_a
    response = httpx.put(f"{srv.url}/api/config/models/a", json={"model": "gpt-4.1-mini", "api_key": ""})
    assert response.status_code == 422 and "api_key" in detail(response)["message"]
    assert runtime.config.models[0].api_key == KEY  # neither saved nor applied


def test_duplicate_copies_the_key_server_side(app_a: tuple[ThreadServer, Any]) -> None:
    srv, runtime = app_a
    response = httpx.post(f"{srv.url}/api/config/models/a/duplicate")
    assert response.status_code == 201 and KEY not in response.text
    assert [m.id for m in runtime.config.models] == ["a", "a-copy"] and runtime.config.models[1].api_key == KEY
    assert httpx.post(f"{srv.url}/api/config/models/zz/duplicate").status_code == 404


def test_delete_refuses_the_chat_model(app_a: tuple[ThreadServer, Any], b: Endpoint) -> None:
    srv, runtime = app_a
    httpx.post(f"{srv.url}/api/config/models", json=profile("b", b))
    assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a", "aux": "b"}).status_code == 200
    in_use = httpx.delete(f"{srv.url}/api/config/models/a")
    assert in_use.status_code == 409 and detail(in_use)["code"] == "model_in_use" and detail(in_use)["hint"]
    gone = httpx.delete(f"{srv.url}/api/config/models/b")
    assert gone.status_code == 200 and [m["id"] for m in gone.json()["models"]] == ["a"]
    assert gone.json()["roles"]["aux"] is None  # the role pointing at it is cleared
    assert httpx.delete(f"{srv.url}/api/config/models/b").status_code == 404


def test_roles_must_name_profiles(app_a: tuple[ThreadServer, Any]) -> None:
    srv, _ = app_a
    response = httpx.put(f"{srv.url}/api/config/roles", json={"chat": "ghost"})
    assert response.status_code == 422 and "roles.chat" in detail(response)["message"]


def test_search_settings(app_a: tuple[ThreadServer, Any]) -> None:
    srv, runtime = app_a
    response = httpx.put(
        f"{srv.url}/api/config/search", json={"backend": "tavily", "tavily_api_key": "tvly-abcdefgh1234"}
    )
    assert response.status_code == 200 and "tvly-abcdefgh1234" not in response.text
    assert response.json()["search"] == {"backend": "tavily", "tavily_api_key": {"set": True, "hint": "…1234"}}
    kept = httpx.put(f"{srv.url}/api/config/search", json={"backend": "off"}).json()["search"]
    assert kept["tavily_api_key"]["set"] is True and runtime.config.search.tavily_api_key == "tvly-abcdefgh1234"
    cleared = httpx.put(f"{srv.url}/api/config/search", json={"tavily_api_key": ""}).json()["search"]
    assert cleared == {"backend": "off", "tavily_api_key": {"set": False, "hint": None}}
    assert httpx.put(f"{srv.url}/api/config/search", json={"backend": "bing"}).status_code == 422


def _skill(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_text(text)


def test_skills_report_each_directory(home: Path, app_a: tuple[ThreadServer, Any], a: Endpoint) -> None:
    srv, runtime = app_a
    first, second = home / "s1", home / "s2"
    _skill(first, "deploy", "---\nname: deploy\ndescription: Ship the app.\n---\nSteps.")
    _skill(first, "broken", "---\nname: broken\n---\nno description")
    _skill(second, "deploy", "---\nname: deploy\ndescription: The other one.\n---\n")
    _skill(second, "lint", "---\nname: lint\ndescription: Check the style.\n---\n")
    response = httpx.put(f"{srv.url}/api/config/skills", json={"dirs": [str(first), str(second), "~/nowhere"]})
    assert response.status_code == 200, response.text
    roots = response.json()["roots"]
    assert [r["exists"] for r in roots] == [True, True, False] and roots[2]["kind"] == "custom"
    assert roots[0]["skills"] == [{"name": "deploy", "description": "Ship the app.", "shadowed": False}]
    assert len(roots[0]["problems"]) == 1 and "description" in roots[0]["problems"][0]["error"]
    assert {(s["name"], s["shadowed"]) for s in roots[1]["skills"]} == {("deploy", True), ("lint", False)}
    assert httpx.get(f"{srv.url}/api/config/skills").json() == response.json()
    sse(srv.url, "/api/chat/stream", {"message": "hi"}, timeout=60)
    sent = json.dumps(a.posts()[-1].json)
    assert (
        "Ship the app." in sent and "Check the style." in sent and "The other one." not in sent
    )  # the new list is live
    blank = httpx.put(f"{srv.url}/api/config/skills", json={"dirs": [" "]})
    assert blank.status_code == 422 and detail(blank)["code"] == "invalid_request"


def test_connection_test_route(app_a: tuple[ThreadServer, Any], a: Endpoint) -> None:
    srv, _ = app_a
    stored = httpx.post(f"{srv.url}/api/config/test", json={"profile_id": "a"}).json()
    assert stored["outcome"] == "ok" and stored["context_window"] == 32768 and stored["window_from_endpoint"]
    assert stored["models"] == ["m", "other"] and stored["note"] is None
    assert a.server.requests[-1].headers["authorization"] == f"Bearer {KEY}"  # the stored key was used
    unlisted = httpx.post(f"{srv.url}/api/config/test", json={"model": "ghost", "base_url": a.url}).json()
    assert unlisted["outcome"] == "ok" and "not in the endpoint's model list" in unlisted["note"]
    dead = httpx.post(f"{srv.url}/api/config/test", json={"model": "m", "base_url": f"http://127.0.0.1:{free_port()}"})
    assert dead.json()["outcome"] == "unreachable"
    a.server.routes["/v1/models"] = Reply.json(403, {"error": {"message": "no"}})
    assert httpx.post(f"{srv.url}/api/config/test", json={"profile_id": "a"}).json()["outcome"] == "auth_failed"
    unknown = httpx.post(f"{srv.url}/api/config/test", json={"profile_id": "zz"})
    assert unknown.status_code == 404 and detail(unknown)["code"] == "model_not_found"
    empty = httpx.post(f"{srv.url}/api/config/test", json={})
    assert empty.status_code == 422 and detail(empty)["code"] == "invalid_request"


def test_writes_from_a_non_local_host_need_a_token(home: Path, a: Endpoint) -> None:
    runtime = make_runtime(home, {"models": [profile("a", a)]})
    with config_server(home, runtime, allowed_hosts=["box.example"]) as srv:
        headers = {"Host": "box.example"}
        assert httpx.get(f"{srv.url}/api/config", headers=headers).status_code == 200
        refused = httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=headers)
        assert refused.status_code == 403 and detail(refused)["code"] == "local_origin_required"
        # Without a token configured, any Authorization header is just a header: still refused.
        bare = {**headers, "Authorization": "Bearer anything"}
        sneaky = httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=bare)
        assert sneaky.status_code == 403 and detail(sneaky)["code"] == "local_origin_required"
        assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}).status_code == 200
    with config_server(home, runtime, allowed_hosts=["box.example"], token="tok-123") as srv:
        remote = {"Host": "box.example", "Authorization": "Bearer tok-123"}
        assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=remote).status_code == 200
        wrong = {"Host": "box.example", "Authorization": "Bearer nope"}
        assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=wrong).status_code == 401

    async def staff_only(request: Request) -> None:
        if request.headers.get("x-staff") != "yes":
            raise HTTPException(403, "staff only")

    with config_server(home, runtime, allowed_hosts=["box.example"], auth=staff_only) as srv:
        staff = {"Host": "box.example", "X-Staff": "yes"}
        assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=staff).status_code == 200
        outsider = {"Host": "box.example", "Authorization": "Bearer x"}
        assert httpx.put(f"{srv.url}/api/config/roles", json={"chat": "a"}, headers=outsider).status_code == 403


# --------------------------------------------------------------------------- switching


def test_config_changed_is_published(app_a: tuple[ThreadServer, Any], b: Endpoint) -> None:
    srv, _ = app_a
    seen: list[Any] = []
    ready = threading.Event()

    def listen() -> None:
        with httpx.Client(timeout=30) as client, client.stream("GET", f"{srv.url}/api/events") as response:
            for frame in iter_frames(response):
                if frame.event == "hello":
                    ready.set()
                if frame.event == "config_changed":
                    seen.append(frame.data)
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert ready.wait(20)
    httpx.post(f"{srv.url}/api/config/models", json=profile("b", b))
    httpx.put(f"{srv.url}/api/config/roles", json={"chat": "b"})
    thread.join(20)
    assert seen and seen[0]["configured"] is True and seen[0]["profile_id"] == "a"  # the add kept chat on a
    assert set(seen[0]) == {"configured", "model", "profile_id", "name"}


def test_a_switch_applies_from_the_next_message(app_a: tuple[ThreadServer, Any], a: Endpoint, b: Endpoint) -> None:
    srv, runtime = app_a
    assert httpx.post(f"{srv.url}/api/config/models", json=profile("b", b)).status_code == 201
    a.hold = True
    result: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: result.update(s=sse(srv.url, "/api/chat/stream", {"message": "one"}, timeout=60))
    )
    first.start()
    assert a.holding.wait(30)  # the run is in flight on A
    switched = httpx.put(f"{srv.url}/api/config/roles", json={"chat": "b"})
    assert switched.status_code == 200 and switched.json()["default_model"] == "b"
    assert runtime.agent.model.base_url == b.url
    a.release.set()
    first.join(60)
    stream = result["s"]
    assert stream.text() == "answer from A"  # the in-flight reply stayed on its model
    session_id = stream.of("session")[0]["session_id"]
    second = sse(srv.url, "/api/chat/stream", {"message": "two", "session_id": session_id}, timeout=60)
    assert second.text() == "answer from B"  # the same chat's next message is on the new model
    history = b.posts()[0].json["messages"]
    assert any(m.get("content") == "answer from A" for m in history)  # with the earlier turn as context
    assert len(a.posts()) == 1 and len(b.posts()) == 1
    info = httpx.get(f"{srv.url}/api/info").json()
    assert info["agents"] == ["lovia"] and info["default_agent"] == "lovia"


def test_unconfigured_serves_the_demo_until_a_model_is_added(home: Path, b: Endpoint) -> None:
    runtime = make_runtime(home)
    with config_server(home, runtime) as srv:
        info = httpx.get(f"{srv.url}/api/info").json()
        assert info["configured"] is False and info["demo"] is True and info["default_agent"] == "lovia"
        assert httpx.post(f"{srv.url}/api/config/models", json=profile("b", b)).status_code == 201
        info = httpx.get(f"{srv.url}/api/info").json()
        assert info["configured"] is True and info["demo"] is False
        assert sse(srv.url, "/api/chat/stream", {"message": "hi"}, timeout=60).text() == "answer from B"


# --------------------------------------------------------------------------- CLI flags


def test_flags_reach_the_agent_and_the_wire(home: Path, a: Endpoint) -> None:
    flags = (
        "--max-tokens",
        "77",
        "--max-retries",
        "2",
        "--provider-timeout",
        "12",
        "--trust-env",
        "--instructions",
        "Be brief.",
        "--no-subagents",  # else the Subagents plugin's instructions follow "Be brief."
    )
    runtime = make_runtime(home, {"models": [profile("a", a)]}, *flags)
    agent = runtime.agent
    assert agent.settings.max_tokens == 77 and agent.retry is not None and agent.retry.max_attempts == 3
    assert agent.instructions == "Be brief."
    client = agent.model._client
    assert client.timeout.read == 12 and client.trust_env is True
    with config_server(home, runtime) as srv:
        assert sse(srv.url, "/api/chat/stream", {"message": "hi"}, timeout=60).text() == "answer from A"
    sent = a.posts()[-1].json
    assert sent["max_tokens"] == 77 and sent["messages"][0] == {"role": "system", "content": "Be brief."}


def test_a_profiles_extra_max_tokens_wins(home: Path, a: Endpoint) -> None:
    runtime = make_runtime(
        home, {"models": [{**profile("a", a), "extra_body": {"max_tokens": 5}}]}, "--max-tokens", "77"
    )
    with config_server(home, runtime) as srv:
        sse(srv.url, "/api/chat/stream", {"message": "hi"}, timeout=60)
    assert a.posts()[-1].json["max_tokens"] == 5


def test_instructions_file_and_agents_md(home: Path) -> None:
    from lovia.web.builder import GENERIC_INSTRUCTIONS, resolve_instructions

    assert resolve_instructions(None, None) == GENERIC_INSTRUCTIONS
    Path("AGENTS.md").write_text("Use tabs.")
    assert resolve_instructions(None, None) == f"{GENERIC_INSTRUCTIONS}\n\nUse tabs."
    Path("other.md").write_text("Use spaces.")
    assert resolve_instructions(None, "other.md").endswith("Use spaces.")


@pytest.mark.parametrize(
    ("flags", "env", "needle"),
    [
        (("--max-tokens", "lots"), {}, "--max-tokens 'lots' is not a whole number"),
        (("--max-tokens", "0"), {}, "must be at least 1"),
        ((), {"LOVIA_MAX_RETRIES": "-1"}, "LOVIA_MAX_RETRIES=-1 must be at least 0"),
        (("--provider-timeout", "soon"), {}, "--provider-timeout 'soon' is not a number"),
        (("--max-turns", "x"), {}, "--max-turns 'x'"),
        (("--instructions-file", "missing.md"), {}, "does not exist"),
        (("--instructions", "  "), {}, "--instructions is empty"),
        (("--app", "mod:agent", "--max-tokens", "5"), {}, "configure the default agent"),
    ],
)
def test_wrong_flag_values_are_clear(
    home: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], env: dict[str, str], needle: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError) as exc:
        check_model_flags(web_args(*flags))
    assert needle in exc.value.message and exc.value.hint


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home / "home"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("LOVIA_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "lovia.web", *args],
        cwd=home / "project",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_reports_a_bad_flag_with_a_hint(home: Path) -> None:
    done = _cli(home, "--max-retries", "many")
    assert done.returncode == 2
    assert "--max-retries 'many' is not a whole number" in done.stderr and "hint: e.g. --max-retries 4" in done.stderr


def test_cli_check_probes_the_configured_profile(home: Path, a: Endpoint) -> None:
    save_config(WebConfig.model_validate({"models": [profile("a", a, key=KEY)]}), home / "home/.lovia/config.json")
    done = _cli(home, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout and "…cdef" in done.stdout and KEY not in done.stdout
    a.server.routes["/v1/models"] = Reply.json(401, {"error": {"message": "bad key"}})
    failed = _cli(home, "--check")
    assert failed.returncode == 1 and "auth_failed" in failed.stdout and "hint:" in failed.stdout


def test_an_incomplete_chat_profile_starts_the_demo(home: Path) -> None:
    runtime = make_runtime(home, {"models": [{"id": "o", "model": "gpt-4.1-mini"}]})  # official API, no key
    assert runtime.configured is False and runtime.agent.name == "lovia"
    assert runtime.config.models[0].id == "o"  # kept, to be fixed in Settings


def test_lovia_web_serves_the_config_and_switches(home: Path, a: Endpoint, b: Endpoint) -> None:
    save_config(WebConfig.model_validate({"models": [profile("a", a, key=KEY)]}), home / "home/.lovia/config.json")
    port = free_port()
    env = {**os.environ, "HOME": str(home / "home"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("LOVIA_MODEL", None)
    cmd = [sys.executable, "-m", "lovia.web", "--port", str(port), "--no-workspace", "--log-level", "warning"]
    cmd += ["--db", str(home / "cli.db"), "--max-tokens", "33"]
    proc = subprocess.Popen(
        cmd, cwd=home / "project", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, timeout=60, interval=0.1)
        assert httpx.get(f"{url}/api/info").json()["features"]["model_config"] is True
        assert sse(url, "/api/chat/stream", {"message": "one"}, timeout=60).text() == "answer from A"
        assert httpx.post(f"{url}/api/config/models", json=profile("b", b)).status_code == 201
        assert httpx.put(f"{url}/api/config/roles", json={"chat": "b"}).status_code == 200
        assert sse(url, "/api/chat/stream", {"message": "two"}, timeout=60).text() == "answer from B"
        assert b.posts()[0].json["max_tokens"] == 33
        saved = json.loads((home / "home/.lovia/config.json").read_text())
        assert saved["roles"]["chat"] == "b" and [m["id"] for m in saved["models"]] == ["a", "b"]
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def test_a_scheduled_run_after_a_switch_uses_the_new_model(
    app_a: tuple[ThreadServer, Any], a: Endpoint, b: Endpoint
) -> None:
    srv, _ = app_a
    made = httpx.post(
        f"{srv.url}/api/schedules", json={"input": "report", "trigger_kind": "every", "trigger_expr": "3600"}
    )
    assert made.status_code in (200, 201), made.text
    httpx.post(f"{srv.url}/api/config/models", json=profile("b", b))
    httpx.put(f"{srv.url}/api/config/roles", json={"chat": "b"})
    fired = httpx.post(f"{srv.url}/api/schedules/{made.json()['id']}/run", timeout=30)
    assert fired.status_code == 200, fired.text
    wait_for(lambda: len(b.posts()) == 1, timeout=30)
    assert a.posts() == []


def test_settings_learn_a_model_that_comes_from_the_command_line_or_the_environment(
    home: Path, a: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_MODEL", "openai:gpt-from-env")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    bare = make_runtime(home)
    with config_server(home, bare) as srv:
        view = httpx.get(f"{srv.url}/api/config").json()
    assert view["models"] == [] and view["model_from_outside"] == {
        "model": "openai:gpt-from-env",
        "source": "LOVIA_MODEL",
    }
    assert make_runtime(home, None, "--model", "openai:gpt-flag").model_from_outside == {
        "model": "openai:gpt-flag",
        "source": "--model",
    }
    saved = make_runtime(home, {"models": [profile("a", a, key=KEY)]})
    assert saved.model_from_outside is None  # a saved profile wins over the variable: nothing to explain
