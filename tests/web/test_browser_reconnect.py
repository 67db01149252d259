# ruff: noqa: F811  (the page/browser fixtures are imported from test_browser and used as arguments)
"""An open chat page outlives its server: SIGKILL or Ctrl+C mid-answer, a new server on the same
port and database, and the page, never reloaded, shows the finished answer and no error box."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from .helpers import ProcessServer, wait_for
from .test_browser import idle, page, pytestmark, send  # noqa: F401  (fixtures, markers)

APP = "tests.web.app_fixture:agent"
ANSWER = "All done: quick and slow both finished."


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "sigint"])
def test_the_open_page_reconnects_and_shows_the_finished_answer(page: Any, tmp_path: Path, sig: int) -> None:
    db, log = str(tmp_path / "chat.db"), tmp_path / "tools.log"
    env = {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "1.0", "LOVIA_FOLLOWUPS": "0"}
    args = ("--db", db, "--app", APP)
    first = ProcessServer(*args, env=env).start()
    try:
        page.goto(first.url)
        send(page, "make the report")
        page.locator('[data-testid="tool-call"][data-call-id^="call_slow"]').wait_for()
        wait_for(lambda: "slow:start" in _log(log), timeout=30)
    finally:
        first.kill(sig)

    status = page.locator('[data-part="reconnecting"]')
    status.wait_for()  # one status line, while the server is away
    page.wait_for_timeout(1500)  # a few failed attempts: still one line, and no error box
    assert status.count() == 1 and page.get_by_test_id("error-card").count() == 0
    assert page.evaluate("document.body.dataset.phase") == "reconnecting"

    with ProcessServer(*args, env=env, port=first.port):
        page.get_by_test_id("message-assistant").filter(has_text=ANSWER).wait_for(timeout=60_000)
        idle(page)
        assert status.count() == 0
        assert page.get_by_test_id("error-card").count() == 0
        assert page.locator(".error").count() == 0
    # the completed tool was not run again; the interrupted one ran again, once
    assert _log(log) == ["quick", "slow:start", "slow:start", "slow:done"]
