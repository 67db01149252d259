"""Acceptance tests written from the outside: `lovia web` as a subprocess, a hand-written
OpenAI-compatible streaming endpoint, and headless Chromium driven only through the page's
data-testid hooks and what a user can see.

Nothing here imports the web app: the server is configured only through LOVIA_MODEL,
OPENAI_BASE_URL (and, in one test, OPENAI_API_KEY), as a user would do it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

import pytest

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT = 12_000  # ms; the machine is small and shared, so be generous (the slow answer takes ~20 s)
XSS = 'Careful: <script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2"> end.'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
expect.set_options(timeout=WAIT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- a tiny fake model


class FakeChatModel:
    """A minimal OpenAI-compatible `POST /v1/chat/completions` streaming endpoint.

    Replies are chosen from the request messages:
    - the last message is a tool result: "The clock tool answered: <result>." (slowly when the
      user's message mentions "slow");
    - the user asks about the time and a `clock` tool is offered: a `clock` tool call;
    - the user says "slow ...": "tick 1 tick 2 ..." at ~4 words a second (for stopping);
    - the user says "xss": hostile HTML in the answer;
    - anything else: "Reply <n> to: <message>", where n counts how often that exact message was
      answered (so a regenerated answer is visibly different from the first one).
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answered: Counter[str] = Counter()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output quiet
                pass

            def do_GET(self) -> None:
                self._plain(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path != "/v1/chat/completions":
                    self._plain(404, b'{"error": {"message": "unknown path"}}')
                    return
                body = json.loads(raw)
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    n = len(fake.requests)
                chunks, delay = fake.plan(body, n)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in chunks:
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                        self.wfile.flush()
                        if delay:
                            time.sleep(delay)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a stopped run): fine

            def _plain(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeChatModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- reply selection

    def plan(self, body: dict[str, Any], n: int) -> tuple[list[dict[str, Any]], float]:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if last.get("role") == "tool":
            slow = "slow" in user.lower()
            text = "The clock tool answered: " + _text(last.get("content")) + "."
            if slow:
                text += "".join(f" tick {i}" for i in range(1, 80))
            return self.text_chunks(text, n, size=8 if slow else 6), (0.25 if slow else 0.01)
        if "time" in user.lower():
            if "clock" not in tools:
                return self.text_chunks("I was offered no clock tool.", n), 0.01
            return self.tool_chunks(n, "clock", "{}"), 0.01
        if user.lower().startswith("slow"):
            text = "".join(f"tick {i} " for i in range(1, 80))
            return self.text_chunks(text, n, size=7), 0.25
        if "xss" in user.lower():
            return self.text_chunks(XSS, n, size=5), 0.01
        with self.lock:
            self.answered[user] += 1
            count = self.answered[user]
        return self.text_chunks(f"Reply {count} to: {user}", n, size=4), 0.02

    @staticmethod
    def _chunk(n: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "outsider-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _tail(self, n: int, finish: str) -> list[dict[str, Any]]:
        usage = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "outsider-model",
            "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        return [self._chunk(n, {}, finish), usage]

    def text_chunks(self, text: str, n: int, size: int = 5) -> list[dict[str, Any]]:
        out = [self._chunk(n, {"role": "assistant", "content": ""})]
        out += [self._chunk(n, {"content": text[i : i + size]}) for i in range(0, len(text), size)]
        return out + self._tail(n, "stop")

    def tool_chunks(self, n: int, name: str, arguments: str) -> list[dict[str, Any]]:
        call = {"index": 0, "id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": ""}}
        return [
            self._chunk(n, {"role": "assistant", "content": None, "tool_calls": [call]}),
            self._chunk(n, {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
            *self._tail(n, "tool_calls"),
        ]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


# --------------------------------------------------------------------------- `lovia web` subprocess


class LoviaWeb:
    """`lovia web --port P --db D` with nothing in the environment but the model variables."""

    def __init__(self, db: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.db = db
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = db.with_suffix(".log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LoviaWeb:
        exe = Path(sys.executable).with_name("lovia")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "lovia.web"]
        if exe.exists():
            cmd.append("web")
        cmd += ["--port", str(self.port), "--db", str(self.db), "--log-level", "warning"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.db.parent, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"lovia web exited early:\n{self.log.read_text()}")
            try:
                with urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"lovia web did not come up:\n{self.log.read_text()}")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def model() -> Iterator[FakeChatModel]:
    with FakeChatModel() as fake:
        yield fake


@pytest.fixture(scope="module")
def web(model: FakeChatModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoviaWeb]:
    env = {"LOVIA_MODEL": "openai:outsider-model", "OPENAI_BASE_URL": model.base_url}  # no key: loopback model
    with LoviaWeb(tmp_path_factory.mktemp("web") / "chats.db", env) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


def _new_page(browser: Any, errors: list[str], **context_args: Any) -> tuple[Any, Any]:
    context = browser.new_context(**context_args)
    page = context.new_page()
    page.set_default_timeout(WAIT)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    return context, page


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    errors: list[str] = []
    context, pg = _new_page(browser, errors, viewport={"width": 1200, "height": 800})
    yield pg
    context.close()
    assert errors == [], errors


# --------------------------------------------------------------------------- user actions


def type_and_click_send(page: Any, text: str) -> None:
    page.get_by_test_id("composer").fill(text)
    page.get_by_test_id("send").click()


def type_and_press_enter(page: Any, text: str) -> None:
    composer = page.get_by_test_id("composer")
    composer.click()
    composer.press_sequentially(text)
    composer.press("Enter")


def wait_done(page: Any) -> None:
    """What an outsider would call 'done': the stop button is gone."""
    expect(page.get_by_test_id("stop")).to_be_hidden(timeout=WAIT)


def bodies(page: Any, testid: str) -> Any:
    return page.get_by_test_id(testid)


# --------------------------------------------------------------------------- tests


def test_enter_sends_and_the_answer_streams_in(web: LoviaWeb, page: Any, model: FakeChatModel) -> None:
    page.goto(web.url)  # no trailing slash, no token
    composer = page.get_by_test_id("composer")
    expect(composer).to_be_enabled()
    type_and_press_enter(page, "hello from the keyboard")
    expect(composer).to_have_value("")
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(bodies(page, "message-user").first).to_contain_text("hello from the keyboard")
    answer = bodies(page, "message-assistant")
    expect(answer).to_have_count(1)
    expect(answer.first).to_contain_text("Reply 1 to: hello from the keyboard")
    wait_done(page)
    expect(answer).to_have_count(1)
    expect(bodies(page, "session-item")).to_contain_text(["hello from the keyboard"])
    sent = [r for r in model.requests if r["messages"][-1].get("content") == "hello from the keyboard"]
    assert sent and sent[0]["model"] == "outsider-model" and sent[0]["stream"] is True


def test_waiting_for_stop_to_disappear_right_after_send_means_done(web: LoviaWeb, page: Any) -> None:
    """An outsider clicks send and immediately waits for `stop` to be hidden: that must mean the
    answer is complete, not 'the run has not started yet'."""
    page.goto(web.url + "/")
    type_and_click_send(page, "a quick question")
    wait_done(page)
    assistant = bodies(page, "message-assistant")
    assert assistant.count() == 1
    assert "Reply 1 to: a quick question" in assistant.first.inner_text()
    assert bodies(page, "message-user").count() == 1


def chat_turns(model: FakeChatModel) -> list[dict[str, Any]]:
    """The model requests that answer the chat: not the follow-up suggestions the page asks for
    after each run (``lovia web`` has them on by default; each is one more model call)."""
    return [
        r
        for r in model.requests
        if "might want to ask next" not in str((r.get("messages") or [{}])[0].get("content", ""))
    ]


def test_empty_composer_sends_nothing(web: LoviaWeb, page: Any, model: FakeChatModel) -> None:
    page.goto(web.url + "/")
    expect(page.get_by_test_id("composer")).to_be_enabled()
    before_requests = len(chat_turns(model))
    page.get_by_test_id("send").click()
    page.get_by_test_id("composer").fill("   \n  ")
    page.get_by_test_id("send").click()
    page.get_by_test_id("composer").press("Enter")
    # Now a real message: it must be the first and only exchange in this chat.
    type_and_click_send(page, "only this one")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: only this one")
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(bodies(page, "session-item").filter(has_text="only this one")).to_have_count(1)
    expect(bodies(page, "session-item").filter(has_text="Untitled")).to_have_count(0)
    assert len(chat_turns(model)) == before_requests + 1


def test_tool_call_of_the_default_agent_is_shown(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "what time is it?")
    tool = page.get_by_test_id("tool-call")
    expect(tool).to_have_count(1)
    expect(tool).to_contain_text("clock")
    expect(bodies(page, "message-assistant").last).to_contain_text("The clock tool answered:")
    wait_done(page)
    expect(tool).to_have_class(re.compile(r"\bdone\b"))
    expect(bodies(page, "message-assistant")).to_have_count(1)
    tool.locator("summary").click()
    expect(tool).to_contain_text(re.compile(r"\d{4}-\d{2}-\d{2}"))  # the clock's result is shown


def test_reload_keeps_the_conversation(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "remember me")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: remember me")
    wait_done(page)
    type_and_click_send(page, "what time is it now?")
    expect(page.get_by_test_id("tool-call")).to_have_count(1)
    expect(bodies(page, "message-assistant").last).to_contain_text("The clock tool answered:")
    wait_done(page)
    page.reload()
    users = bodies(page, "message-user")
    expect(users).to_have_count(2)
    expect(users.nth(0)).to_contain_text("remember me")
    expect(users.nth(1)).to_contain_text("what time is it now?")
    expect(bodies(page, "message-assistant")).to_have_count(2)
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: remember me")
    expect(page.get_by_test_id("tool-call")).to_have_class(re.compile(r"\bdone\b"))
    # A fresh tab on the bare URL finds the chat in the sidebar.
    page.goto(web.url)
    page.get_by_test_id("session-item").filter(has_text="remember me").click()
    expect(bodies(page, "message-user")).to_have_count(2)
    expect(bodies(page, "message-assistant").last).to_contain_text("The clock tool answered:")


def test_new_chat_and_switching_between_chats(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    items = page.get_by_test_id("session-item")
    type_and_click_send(page, "apples chat")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: apples chat")
    wait_done(page)
    page.get_by_test_id("new-chat").click()
    expect(bodies(page, "message-user")).to_have_count(0)
    expect(bodies(page, "message-assistant")).to_have_count(0)
    type_and_click_send(page, "pears chat")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: pears chat")
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(items.filter(has_text="apples chat")).to_have_count(1)
    expect(items.filter(has_text="pears chat")).to_have_count(1)
    expect(items.first).to_contain_text("pears chat")  # most recent first

    items.filter(has_text="apples chat").click()
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(bodies(page, "message-user").first).to_contain_text("apples chat")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: apples chat")
    # Continue the first chat: the second chat must not get the message.
    type_and_click_send(page, "more apples")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: more apples")
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(2)

    items.filter(has_text="pears chat").click()
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(bodies(page, "message-user").first).to_contain_text("pears chat")
    expect(page.locator("#messages")).not_to_contain_text("apples")


def test_stop_during_a_slow_stream_keeps_completed_turns(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "before the slow one")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: before the slow one")
    wait_done(page)
    # A tool-call turn completes, then the final answer streams slowly.
    type_and_click_send(page, "slowly tell me the time")
    stop = page.get_by_test_id("stop")
    expect(stop).to_be_visible()
    expect(page.get_by_test_id("tool-call")).to_have_count(1)
    expect(bodies(page, "message-assistant").last).to_contain_text("tick 3")  # it streams
    stop.click()
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(2)
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: before the slow one")
    expect(page.get_by_test_id("tool-call")).to_have_count(1)
    expect(page.get_by_test_id("tool-call")).to_have_class(re.compile(r"\bdone\b"))
    expect(page.locator("body")).not_to_contain_text("tick 79")
    # The same holds after a reload, and the chat takes new messages.
    page.reload()
    expect(bodies(page, "message-user")).to_have_count(2)
    expect(page.get_by_test_id("tool-call")).to_have_count(1)
    expect(page.get_by_test_id("stop")).to_be_hidden()
    type_and_click_send(page, "after the stop")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: after the stop")
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(3)


def test_stop_a_plain_slow_stream(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "first, quick")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: first, quick")
    wait_done(page)
    type_and_press_enter(page, "slow count please")
    expect(bodies(page, "message-assistant").last).to_contain_text("tick 2")
    page.get_by_test_id("stop").click()
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(2)
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: first, quick")
    expect(page.locator("body")).not_to_contain_text("tick 79")


def test_edit_replaces_that_exchange(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "keep this one")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: keep this one")
    wait_done(page)
    type_and_click_send(page, "typo in thsi one")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: typo in thsi one")
    wait_done(page)

    second = bodies(page, "message-user").nth(1)
    second.get_by_test_id("edit").click()
    box = second.get_by_test_id("edit-box")
    expect(box).to_be_visible()
    expect(box).to_have_value("typo in thsi one")
    box.fill("fixed this one")
    second.get_by_test_id("save-edit").click()
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: fixed this one")
    wait_done(page)
    users = bodies(page, "message-user")
    expect(users).to_have_count(2)
    expect(users.nth(0)).to_contain_text("keep this one")
    expect(users.nth(1)).to_contain_text("fixed this one")
    expect(bodies(page, "message-assistant")).to_have_count(2)
    # the earlier version is kept behind the message's arrows, not on screen
    expect(page.locator("#messages")).not_to_contain_text("thsi", use_inner_text=True)
    expect(page.get_by_test_id("edit-count").locator("visible=true")).to_have_text("2/2")
    expect(page.get_by_test_id("edit-box")).to_have_count(0)
    page.reload()
    expect(bodies(page, "message-user")).to_have_count(2)
    expect(page.locator("#messages")).not_to_contain_text("thsi", use_inner_text=True)
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: fixed this one")


def test_edit_the_first_message_replaces_everything_after_it(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "opening line one")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: opening line one")
    wait_done(page)
    type_and_click_send(page, "follow-up line")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: follow-up line")
    wait_done(page)
    first = bodies(page, "message-user").first
    first.get_by_test_id("edit").click()
    expect(first.get_by_test_id("edit-box")).to_have_value("opening line one")
    first.get_by_test_id("edit-box").fill("opening line two")
    first.get_by_test_id("save-edit").click()
    wait_done(page)  # no waiting for the text first: "stop hidden" must mean the new answer is in
    assert "Reply 1 to: opening line two" in bodies(page, "message-assistant").last.inner_text()
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(bodies(page, "message-assistant")).to_have_count(1)
    expect(page.locator("#messages")).not_to_contain_text("follow-up")  # not kept: a later turn
    expect(page.locator("#messages")).not_to_contain_text("line one", use_inner_text=True)


def test_regenerate_replaces_the_last_answer(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "older question")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: older question")
    wait_done(page)
    type_and_click_send(page, "regenerate this")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: regenerate this")
    wait_done(page)
    regen = page.get_by_test_id("regenerate")
    expect(regen).to_have_count(1)  # only on the last answer
    regen.click()
    wait_done(page)  # right after the click: a hidden stop button must already mean "finished"
    assert "Reply 2 to: regenerate this" in bodies(page, "message-assistant").last.inner_text()
    expect(bodies(page, "message-assistant")).to_have_count(2)
    expect(bodies(page, "message-user")).to_have_count(2)
    # The replaced answer is not shown, but stays reachable behind the answer's pager (‹ 1/2 ›).
    assert "Reply 1 to: regenerate this" not in bodies(page, "message-assistant").last.inner_text()
    expect(page.locator("[data-testid=variant-count]:visible")).to_have_text("2/2")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: older question")
    page.reload()
    expect(bodies(page, "message-assistant")).to_have_count(2)
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 2 to: regenerate this")
    page.locator("[data-testid=variant-prev]:visible").click()
    expect(page.locator("[data-testid=variant-count]:visible")).to_have_text("1/2")
    expect(page.locator("#messages")).to_contain_text("Reply 1 to: regenerate this")


def test_hostile_model_output_is_shown_as_text(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "xss please")
    answer = bodies(page, "message-assistant").first
    expect(answer).to_contain_text("<script>window.__pwned=1</script>")
    expect(answer).to_contain_text('<img src=x onerror="window.__pwned=2">')
    wait_done(page)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#messages img, #messages script").count() == 0
    page.reload()
    expect(bodies(page, "message-assistant").first).to_contain_text("<script>window.__pwned=1</script>")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#messages img, #messages script").count() == 0


def test_user_typed_html_is_shown_as_text(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    hostile = '<img src=x onerror="window.__pwned=3">'
    type_and_click_send(page, hostile)
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to:")
    wait_done(page)
    expect(bodies(page, "message-user").first).to_contain_text(hostile)
    expect(page.get_by_test_id("session-item").first).to_contain_text("<img")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0


def test_narrow_viewport_still_sends(web: LoviaWeb, browser: Any) -> None:
    errors: list[str] = []
    context, page = _new_page(browser, errors, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page.goto(web.url + "/")
        composer = page.get_by_test_id("composer")
        send = page.get_by_test_id("send")
        expect(composer).to_be_visible()
        expect(send).to_be_in_viewport()
        composer.fill("from a phone")
        send.tap()
        expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: from a phone")
        wait_done(page)
        expect(send).to_be_in_viewport()
        box = send.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
    finally:
        context.close()
    assert errors == [], errors


def test_api_key_and_trailing_slashes(model: FakeChatModel, browser: Any, tmp_path: Path) -> None:
    """A second setup: a key is set and the base URL ends with '/'; the page is opened at '/'."""
    env = {
        "LOVIA_MODEL": "openai:outsider-model",
        "OPENAI_BASE_URL": model.base_url + "/",
        "OPENAI_API_KEY": "sk-outsider",
    }
    errors: list[str] = []
    with LoviaWeb(tmp_path / "keyed.db", env) as srv:
        context, page = _new_page(browser, errors)
        try:
            page.goto(srv.url + "/")
            type_and_click_send(page, "keyed hello")
            expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: keyed hello")
            wait_done(page)
        finally:
            context.close()
    assert errors == [], errors
    idx = next(i for i, r in enumerate(model.requests) if r["messages"][-1].get("content") == "keyed hello")
    assert model.headers[idx].get("authorization") == "Bearer sk-outsider"


def slow_network(page: Any, latency_ms: int = 400) -> None:
    """Emulate a slow link (every request takes latency_ms longer), as on a phone."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    conditions = {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1}
    cdp.send("Network.emulateNetworkConditions", conditions)


def test_stop_right_after_send_in_a_new_chat(web: LoviaWeb, page: Any) -> None:
    """An impatient user on a slow link: send, then stop at once, before any token has arrived."""
    page.goto(web.url)
    expect(page.get_by_test_id("composer")).to_be_enabled()
    slow_network(page)
    type_and_click_send(page, "slow and impatient")
    page.get_by_test_id("stop").click()
    wait_done(page)  # must not wait for the whole ~20 s slow answer
    expect(page.locator("#messages")).not_to_contain_text("tick 79")
    expect(page.get_by_test_id("session-item").filter(has_text="slow and impatient")).to_have_count(1)
    type_and_click_send(page, "after an early stop")
    expect(bodies(page, "message-assistant").last).to_contain_text("Reply 1 to: after an early stop")
    wait_done(page)


def test_stop_right_after_send_in_an_existing_chat(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "warm-up line")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: warm-up line")
    wait_done(page)
    slow_network(page)
    type_and_click_send(page, "slow again, stop me now")
    page.get_by_test_id("stop").click()
    wait_done(page)
    expect(page.locator("#messages")).not_to_contain_text("tick 79")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: warm-up line")


def test_shift_enter_makes_a_new_line_enter_sends(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    composer = page.get_by_test_id("composer")
    composer.click()
    composer.press_sequentially("line one")
    composer.press("Shift+Enter")
    composer.press_sequentially("line two")
    expect(bodies(page, "message-user")).to_have_count(0)
    composer.press("Enter")
    expect(bodies(page, "message-assistant").first).to_contain_text("Reply 1 to: line one")
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(1)
    user_text = bodies(page, "message-user").first.inner_text()
    assert "line one" in user_text and "line two" in user_text


def test_reload_during_a_slow_answer_reattaches(web: LoviaWeb, page: Any) -> None:
    page.goto(web.url)
    type_and_click_send(page, "slow, survive a reload")
    expect(bodies(page, "message-assistant").last).to_contain_text("tick 2")
    page.reload()
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(page.get_by_test_id("stop")).to_be_visible()
    expect(bodies(page, "message-assistant").last).to_contain_text("tick 8")  # still streaming after the reload
    page.get_by_test_id("stop").click()
    wait_done(page)
    expect(bodies(page, "message-user")).to_have_count(1)
    expect(page.locator("#messages")).not_to_contain_text("tick 79")
