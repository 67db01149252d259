"""The web UI page (``web-ui.md``) checked from the outside: what it promises about charts,
tables and pages, questions from the agent, uploads and the Files panel's listings, titles,
dreaming, and (in headless Chromium) the page's public surfaces: design tokens per theme,
``data-part`` regions and ``window.lovia``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")


from lovia import Agent, Memory, ToolError
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import HumanChannel, ask_human
from lovia.web import (
    SURFACE_NOTE,
    ChatUI,
    create_app,
    show_chart,
    show_html,
    show_table,
    validate_chart_option,
)
from lovia.workspace import Workspace

from .outsider_kit import app_client, collect, first, read_until, rest_of, scripted, wait_until

# --------------------------------------------------------------------------- charts, tables, pages


def test_surface_note_is_a_sentence_for_the_instructions() -> None:
    assert isinstance(SURFACE_NOTE, str) and "Markdown" in SURFACE_NOTE


def test_show_chart_draws_the_option_the_model_wrote(tmp_path: Path) -> None:
    option = {"title": {"text": "Sales"}, "xAxis": {"type": "category", "data": ["a", "b"]}, "yAxis": {}}
    option["series"] = [{"type": "bar", "data": [3, 5]}]
    agent = scripted(call("show_chart", {"option": option}), "drawn", tools=[show_chart])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "chart"})
    result = first(frames, "tool_result")
    assert result["is_error"] is False
    assert json.loads(result["result"])["lovia_ui"]["kind"] == "chart"


def test_a_bad_chart_option_is_a_tool_error_the_model_can_fix(tmp_path: Path) -> None:
    good = {"series": [{"type": "line", "data": [1, 2, 3]}]}
    validate_chart_option(good)
    for bad in ({"series": [{"type": "no-such-chart", "data": [1]}]}, {"series": "nope"}, {"title": {"text": "x"}}):
        with pytest.raises(ToolError):
            validate_chart_option(bad)
    with pytest.raises(ToolError):
        validate_chart_option({"series": [{"type": "line", "data": ["x" * 100] * 1000}]})  # over 64 KB
    agent = scripted(call("show_chart", {"option": {"series": "nope"}}), "sorry", tools=[show_chart])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "chart"})
    assert first(frames, "tool_result")["is_error"] is True


def test_show_table_and_show_html_are_components(tmp_path: Path) -> None:
    table = {"title": "Orders", "columns": ["id", "total"], "rows": [[1, 9.5], [2, None]]}
    page = {"html": "<!doctype html><p>hi</p>", "title": "Hello"}
    agent = scripted(call("show_table", table), call("show_html", page), "shown", tools=[show_table, show_html])
    with app_client(agent, tmp_path) as client:
        frames = collect(client, "/api/chat/stream", {"message": "show"})
    kinds = [json.loads(d["result"])["lovia_ui"]["kind"] for ev, d in frames if ev == "tool_result"]
    assert kinds == ["table", "html"]
    assert [d["is_error"] for ev, d in frames if ev == "tool_result"] == [False, False]


# --------------------------------------------------------------------------- questions from the agent


def test_a_question_from_the_agent_waits_for_the_users_answer(tmp_path: Path) -> None:
    channel = HumanChannel()
    agent = Agent(
        name="bot",
        model=ScriptedProvider([call("ask_human", {"question": "Which region?"}), text("Thanks, noted.")]),
        tools=[ask_human(channel)],
    )
    with app_client(agent, tmp_path, question_channel=channel, question_timeout=600) as client:
        with client.stream("POST", "/api/chat/stream", json={"message": "report"}) as response:
            frames = read_until(response, lambda ev, data: ev == "tool_call")
            sid = first(frames, "session")["session_id"]
            answered = wait_until(
                lambda: (
                    (r := client.post("/api/chat/answer", json={"session_id": sid, "answer": "EMEA"})).status_code
                    == 200
                    and r
                )
            )
            assert answered.status_code == 200
            rest = rest_of(response)
    result = first(rest, "tool_result")
    assert "EMEA" in json.dumps(result["result"])
    assert first(rest, "done")["output"] == "Thanks, noted."


def test_a_question_times_out_into_a_tool_error(tmp_path: Path) -> None:
    channel = HumanChannel()
    agent = Agent(
        name="bot",
        model=ScriptedProvider([call("ask_human", {"question": "Anyone there?"}), text("Nobody answered.")]),
        tools=[ask_human(channel)],
    )
    with app_client(agent, tmp_path, question_channel=channel, question_timeout=0.3) as client:
        frames = collect(client, "/api/chat/stream", {"message": "ask"})
    assert first(frames, "tool_result")["is_error"] is True
    assert first(frames, "done")["output"] == "Nobody answered."


def test_answering_when_nothing_is_asked_is_question_not_found(tmp_path: Path) -> None:
    channel = HumanChannel()
    with app_client(scripted("x", tools=[ask_human(channel)]), tmp_path, question_channel=channel) as client:
        sid = client.post("/api/chat", json={"message": "hi"}).json()["session_id"]
        refused = client.post("/api/chat/answer", json={"session_id": sid, "answer": "yes"})
    assert refused.status_code == 404 and refused.json()["detail"]["code"] == "question_not_found"


# --------------------------------------------------------------------------- uploads and the Files panel


def test_the_upload_allowlist_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setenv("LOVIA_UPLOAD_ALLOWED_EXT", "png, pdf")
    agent = scripted("x", workspace=Workspace.local(str(root)))
    with app_client(agent, tmp_path) as client:
        refused = client.post("/api/workspace/upload", files={"file": ("notes.txt", b"hi", "text/plain")})
        assert refused.status_code == 415 and refused.json()["detail"]["code"] == "unsupported_file_type"
        ok = client.post("/api/workspace/upload", files={"file": ("doc.pdf", b"%PDF-1.4", "application/pdf")})
        assert ok.status_code == 200 and ok.json()["path"] == "uploads/doc.pdf"
    monkeypatch.setenv("LOVIA_UPLOAD_ALLOWED_EXT", "*")
    with app_client(agent, tmp_path / "any") as client:
        anything = client.post("/api/workspace/upload", files={"file": ("data.weird", b"x", "application/x-weird")})
        assert anything.status_code == 200


def test_an_image_upload_is_an_image(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    with app_client(scripted("x", workspace=Workspace.local(str(root))), tmp_path) as client:
        info = client.post("/api/workspace/upload", files={"file": ("chart.png", png, "image/png")}).json()
    assert info["kind"] == "image" and info["mime"] == "image/png" and info["size"] == len(png)


def test_recent_files_leave_out_noise_and_the_scratch_dir(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for rel in ("report.md", "tmp/scratch.txt", "node_modules/x/index.js", "venv/lib/a.py", "pkg/__pycache__/m.pyc"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (root / "pkg" / "mod.cpython-312.pyc").write_bytes(b"\x00")
    with app_client(scripted("x", workspace=Workspace.local(str(root))), tmp_path) as client:
        recent = json.dumps(client.get("/api/workspace/recent").json())
        assert "report.md" in recent
        for noise in ("scratch.txt", "node_modules", "venv", "__pycache__", ".pyc"):
            assert noise not in recent, noise
        # browsing still shows the scratch dir
        names = {e["name"] for e in client.get("/api/workspace/files").json()}
        assert "tmp" in names


# --------------------------------------------------------------------------- titles and dreaming


def test_a_title_model_retitles_a_new_chat(tmp_path: Path) -> None:
    titler = ScriptedProvider([text("Quarterly revenue question")])
    with app_client(scripted("It grew."), tmp_path, title_model=titler) as client:
        seen: list[tuple[str, Any]] = []
        subscribed = threading.Event()

        def listen() -> None:
            from .outsider_kit import parse_sse

            with client.stream("GET", "/api/events") as response:
                subscribed.set()
                for ev, data in parse_sse(response.iter_lines()):
                    seen.append((ev, data))
                    if ev == "session_retitled":
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert subscribed.wait(10)
        sid = client.post("/api/chat", json={"message": "how did revenue do last quarter?"}).json()["session_id"]
        wait_until(lambda: client.get(f"/api/sessions/{sid}").json()["title"] == "Quarterly revenue question")
        listener.join(10)
    assert first(seen, "session_retitled") == {"session_id": sid, "title": "Quarterly revenue question"}


def test_dream_tidies_the_notes_now(tmp_path: Path) -> None:
    memory = Memory(
        tmp_path / "memory",
        index=None,
        auto_curate=False,
        model=ScriptedProvider([text('{"notes": ["likes tea", "lives in Oslo"]}')]),
    )
    agent = scripted("x")
    agent.plugins.append(memory)
    with app_client(agent, tmp_path) as client:
        client.put("/api/memory", json={"content": "- likes tea\n- likes tea\n- lives in Oslo\n"})
        dreamed = client.post("/api/memory/dream", params={"agent": "bot"})
        assert dreamed.status_code == 200, dreamed.text
        body = dreamed.json()
    assert set(body) >= {"content", "used", "budget", "dreamed_at", "before", "after"}
    assert isinstance(body["before"], int) and isinstance(body["after"], int)
    assert body["dreamed_at"] is not None and "lives in Oslo" in body["content"]
    assert body["after"] == 2


# --------------------------------------------------------------------------- the page in a browser

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    """The app with a theme and an extension script, on a real port (the page needs a browser)."""
    import socket

    import uvicorn

    folder = tmp_path / "ui"
    folder.mkdir()
    (folder / "theme.css").write_text(
        '[data-theme="light"] { --accent: #6d28d9; }\n[data-theme="dark"] { --accent: #a78bfa; }\n'
        ':root { --sans: "Courier New", monospace; }\n[data-part="export"] { display: none; }\n'
    )
    (folder / "acme.js").write_text(
        "window.acmeSeen = window.lovia.version;\n"
        "window.lovia.registerRenderer('kpis', { render(el, props) {\n"
        "  for (const item of props.items) { const d = document.createElement('div');\n"
        "    d.className = 'kpi'; d.textContent = `${item.label}: ${item.value}`; el.append(d); } } });\n"
    )

    from lovia import tool
    from lovia.web import ui_result

    @tool
    def kpis() -> str:
        """Key numbers."""
        return ui_result("kpis", {"items": [{"label": "Revenue", "value": 42}]})

    agent = scripted(call("kpis", {}), "Here are the numbers.", tools=[kpis])
    ui = ChatUI(assets=folder, styles=["theme.css"], scripts=["acme.js"], empty_title="Ask Acme")
    app = create_app(agent, db_path=tmp_path / "chat.db", ui=ui)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=15)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(20)


@pytest.mark.browser
@pytest.mark.parametrize(("scheme", "accent"), [("light", "#6d28d9"), ("dark", "#a78bfa")])
def test_tokens_per_theme_and_your_stylesheet_win(browser: Any, served: str, scheme: str, accent: str) -> None:
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    try:
        page.goto(served + "/")
        page.wait_for_function("window.lovia && window.acmeSeen")
        assert page.evaluate("document.documentElement.dataset.theme") == scheme
        css = "getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"
        assert page.evaluate(css) == accent
        send = page.evaluate("getComputedStyle(document.querySelector('[data-testid=send]')).backgroundColor")
        hex_to_rgb = tuple(int(accent[i : i + 2], 16) for i in (1, 3, 5))
        assert send == "rgb({}, {}, {})".format(*hex_to_rgb)  # the bundled rules follow the token
        font = page.evaluate("getComputedStyle(document.body).fontFamily")
        assert "Courier New" in font
        assert page.evaluate("window.lovia.state.theme") == scheme
    finally:
        context.close()


@pytest.mark.browser
def test_data_part_regions_and_window_lovia(browser: Any, served: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(served + "/")
        page.wait_for_function("window.lovia !== undefined")
        page.evaluate("window.lovia.ready")
        for part in (
            "sidebar",
            "sidebar-header",
            "sidebar-nav",
            "new-chat",
            "sessions-search",
            "sessions",
            "topbar",
            "chat-title",
            "topbar-actions",
            "schedules",
            "view",
            "transcript",
            "welcome",
            "composer",
            "attach",
            "files-panel",
            "language",
        ):
            assert page.locator(f'[data-part="{part}"]').count() >= 1, part
        state = page.evaluate("({...window.lovia.state})")
        assert state["sessionId"] is None and state["busy"] is False and state["view"] is None
        assert isinstance(page.evaluate("window.lovia.version"), str)
        assert page.evaluate("typeof window.lovia.registerToolView") == "function"
        assert "Ask Acme" in page.locator('[data-part="welcome"]').inner_text()
        # A renderer your script registered draws the component the tool returned.
        page.get_by_test_id("composer").fill("numbers please")
        page.get_by_test_id("send").click()
        page.locator(".kpi").first.wait_for(timeout=15_000)
        assert page.locator(".kpi").first.inner_text() == "Revenue: 42"
        tool = page.locator('[data-part="tool"][data-tool="kpis"]')
        assert tool.count() == 1
        page.wait_for_function("document.querySelector('[data-part=tool]').dataset.status === 'done'")
        assert page.locator('[data-part="turn"][data-role="user"]').count() == 1
    finally:
        context.close()
    assert errors == []
