"""Regenerate the chat page screenshots in docs/img/ (light and dark, desktop and 390 px wide).

    python scripts/web_screenshots.py            # writes docs/img/web-{light,dark}-{desktop,390}.png,
                                                 # web-export.png, web-theme-dark-ring.png and web-activity.png
    python scripts/web_screenshots.py --out DIR  # somewhere else (the test suite does this)

Offline: a scripted model answers in Markdown, one run fails with a provider error (the error
card) and one is stopped mid-answer (the "stopped" mark). A second server with two agents shows
the agent switcher and the open Export menu. Two more pictures: Dark picked in the Theme menu,
with the composer's context ring, and a reply whose tool steps fold under one line.
Needs lovia[web,dev] and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lovia import Agent, tool
from lovia.context import NoopContextPolicy
from lovia.exceptions import ProviderError
from lovia.messages import Usage
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import create_app

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SIZES = {"desktop": {"width": 1280, "height": 860}, "390": {"width": 390, "height": 844}}

ANSWER = """Here is the plan for **Friday's release**:

1. Freeze the branch
   - tag `v1.4.0`
   - [x] changelog written
   - [ ] announcement drafted
2. Run the checks:

   ```python
   def ready(build: dict) -> bool:
       return build["tests"] == "green" and not build["blockers"]
   ```

| step | owner | when |
|---|---|---|
| freeze | Ana | 10:00 |
| deploy | Bo | 14:00 |
"""


@tool
def release_status(version: str) -> dict[str, Any]:
    """The state of a release."""
    return {"version": version, "tests": "green", "blockers": []}


@tool
def read_changelog(version: str) -> str:
    """The changelog of a release."""
    return f"## {version}\n- faster sync\n- fewer surprises"


@tool
def list_blockers(milestone: str) -> list[str]:
    """Open issues that block a milestone."""
    return []


class _Window(NoopContextPolicy):
    """Sends the whole transcript, and names the model's context window (for the ring)."""

    context_window = 128_000


CHECKS = (
    ("release_status", {"version": "1.4.0"}),
    ("read_changelog", {"version": "1.4.0"}),
    ("list_blockers", {"milestone": "1.4"}),
)


def _script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said = next(e.text for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
    tools_done = sum(1 for e in entries if isinstance(e, ToolResultEntry))
    if said.startswith("Plan") and tools_done == 0:
        return call("release_status", {"version": "1.4.0"}, call_id="call_status")
    if said.startswith("Plan"):
        return text(ANSWER, usage=Usage(input_tokens=41_200, output_tokens=380))
    if said.startswith("Check") and tools_done < len(CHECKS):
        name, args = CHECKS[tools_done]
        return call(name, args, call_id=f"call_check_{tools_done}")
    if said.startswith("Check"):
        return text("All three checks pass: tests are green, the changelog is written, and no issue blocks 1.4.")
    if said.startswith("Ask"):
        raise ProviderError(
            "openai (gpt-4.1-mini): HTTP 500: upstream overloaded",
            status_code=500,
            retryable=False,
            hint="the endpoint failed; try again in a moment",
        )
    return text("Drafting the announcement: " + "the release brings faster sync and fewer surprises; " * 30, delay=0.03)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(app: Any) -> tuple[Any, threading.Thread, str]:
    import uvicorn

    from lovia.web.server import _server_class

    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none", lifespan="on")
    server = _server_class()(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


def _seed(page: Any, url: str) -> str:
    """Three runs in one chat: a Markdown answer after a tool call, a failure, a stopped answer."""
    page.goto(url)
    for message in ("Plan Friday's release", "Ask the model for a summary", "Write the announcement"):
        page.get_by_test_id("composer").fill(message)
        page.get_by_test_id("send").click()
        if message.startswith("Write"):
            page.get_by_text("fewer surprises").first.wait_for()
            page.wait_for_timeout(600)
            page.get_by_test_id("stop").click()
        page.get_by_test_id("stop").wait_for(state="hidden")
    return str(page.url)


def _export_shot(browser: Any, out: Path, tmp: str) -> Path:
    """Two agents (so the sidebar has its switcher), one chat, and the Export menu open."""
    agents = {
        "assistant": Agent(name="assistant", model=ScriptedProvider(_script), tools=[release_status]),
        "researcher": Agent(name="researcher", model=ScriptedProvider(_script, model="research-model")),
    }
    server, thread, url = _serve(create_app(agents, db_path=str(Path(tmp) / "export.db"), title="lovia"))
    try:
        page = browser.new_page(viewport=SIZES["desktop"])
        page.goto(url)
        page.get_by_test_id("composer").fill("Plan Friday's release")
        page.get_by_test_id("send").click()
        page.get_by_test_id("stop").wait_for(state="hidden")
        page.wait_for_function("() => !document.querySelector('[data-testid=export]').disabled")
        page.get_by_test_id("export").click()
        page.get_by_test_id("export-menu").wait_for()
        page.wait_for_timeout(200)
        path = out / "web-export.png"
        page.screenshot(path=str(path))
        page.close()
        return path
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def _theme_and_activity(browser: Any, url: str, chat_url: str, out: Path) -> list[Path]:
    """Dark picked in the Theme menu (the ring beside the composer), and a folded reply."""
    page = browser.new_page(viewport=SIZES["desktop"], color_scheme="light")
    page.goto(chat_url)
    page.get_by_test_id("stopped-mark").wait_for()
    page.get_by_test_id("theme").select_option("dark")
    page.get_by_test_id("context-ring").wait_for()
    page.wait_for_timeout(200)
    ring = out / "web-theme-dark-ring.png"
    page.screenshot(path=str(ring))
    page.close()
    page = browser.new_page(viewport=SIZES["desktop"], color_scheme="light")
    page.goto(url)
    page.get_by_test_id("composer").fill("Check that 1.4.0 is ready")
    page.get_by_test_id("send").click()
    page.get_by_test_id("stop").wait_for(state="hidden")
    page.locator("[data-part=activity]").first.wait_for()
    page.wait_for_timeout(200)
    activity = out / "web-activity.png"
    page.screenshot(path=str(activity))
    page.close()
    return [ring, activity]


def take(out: Path) -> list[Path]:
    """Write the screenshots into ``out``; return their paths."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    agent = Agent(
        name="assistant",
        model=ScriptedProvider(_script),
        tools=[release_status, read_changelog, list_blockers],
        context_policy=_Window(),
    )
    with tempfile.TemporaryDirectory(prefix="lovia-shots-") as tmp:
        server, thread, url = _serve(create_app(agent, db_path=str(Path(tmp) / "shots.db"), title="lovia"))
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
                chat_url = _seed(browser.new_page(viewport=SIZES["desktop"]), url)
                written = []
                for scheme in ("light", "dark"):
                    for size, viewport in SIZES.items():
                        page = browser.new_page(viewport=viewport, color_scheme=scheme)
                        page.goto(chat_url)
                        page.get_by_test_id("stopped-mark").wait_for()
                        page.wait_for_timeout(200)
                        path = out / f"web-{scheme}-{size}.png"
                        page.screenshot(path=str(path))
                        written.append(path)
                        page.close()
                written.append(_export_shot(browser, out, tmp))
                written += _theme_and_activity(browser, url, chat_url, out)
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=20)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="folder for the PNG files")
    for path in take(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
