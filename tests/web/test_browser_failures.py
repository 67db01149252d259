"""The page when things go wrong, in real Chromium against a real OpenAI-compatible endpoint.

The endpoint is a local HTTP server speaking the chat-completions stream (tests/providers/servers.py):
down (nothing listens), failing with HTTP 500, rate limiting with 429 + ``Retry-After``, or
streaming slowly so the user can press Stop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from lovia import Agent
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.reliability import RetryPolicy
from lovia.web import create_app
from tests.providers.servers import FakeServer, Reply, openai_chunk, openai_stream, openai_text_stream

from .helpers import ThreadServer, free_port, inspect_store, wait_for
from .test_browser import CHROMIUM, idle, send


def inspect(db: str, fn: Any) -> Any:
    """``inspect_store`` off the playwright thread (whose event loop is running)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(inspect_store, db, fn).result()


pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert errors == [], errors


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def openai_app(base_url: str, db: str, *, attempts: int = 2, backoff: float = 0.05) -> Any:
    provider = OpenAIChatProvider("fake-model", api_key="sk-test", base_url=base_url)
    policy = RetryPolicy(max_attempts=attempts, backoff_base=backoff, backoff_max=5.0)
    return create_app(Agent(name="assistant", model=provider, retry=policy), db_path=db)


def error_card(page: Any) -> Any:
    card = page.get_by_test_id("error-card")
    card.wait_for()
    return card


def test_endpoint_down_shows_an_error_card_that_survives_reload(
    page: Any, db: str, caplog: pytest.LogCaptureFixture
) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    caplog.set_level(logging.WARNING, logger="lovia.web")
    with ThreadServer(openai_app(down, db)) as srv:
        page.goto(srv.url)
        send(page, "hello?")
        card = error_card(page)
        idle(page)
        # what happened in plain words first; the exact error under Details
        assert "The model could not be reached." in card.inner_text()
        assert "ProviderError" in card.text_content()
        assert "connection failed" in card.text_content()
        assert page.get_by_role("alert").count() == 1
        page.reload()
        card = error_card(page)
        assert "connection failed" in card.text_content()
        assert page.get_by_test_id("message-user").count() == 1
    failed = [r for r in caplog.records if "failed" in r.getMessage() and r.name == "lovia.web"]
    assert len(failed) == 1, [r.getMessage() for r in caplog.records]
    runs = inspect(db, lambda s: s.checkpointer.list_runs())
    assert [r.status for r in runs] == ["failed"]
    snap = inspect(db, lambda s: s.checkpointer.load(runs[0].run_id))
    assert snap.error["type"] == "ProviderError" and "connection failed" in snap.error["message"]


def test_http_500_shows_type_message_and_hint(page: Any, db: str, fake: FakeServer) -> None:
    boom = Reply.json(500, {"error": {"message": "the model server fell over", "type": "server_error"}})
    fake.enqueue(boom, boom)
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "hi")
        card = error_card(page)
        idle(page)
        assert "The model service ran into a problem." in card.inner_text()
        card.get_by_text("Details").click()  # the exact error, for whoever runs the server
        text = card.inner_text()
        assert "ProviderError" in text and "HTTP 500" in text and "the model server fell over" in text
        page.reload()
        assert "HTTP 500" in error_card(page).text_content()
    assert len(fake.posts()) == 2  # retried once under the policy, then failed


def test_a_401_card_carries_the_hint(page: Any, db: str, fake: FakeServer) -> None:
    fake.enqueue(Reply.json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}}))
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "hi")
        card = error_card(page)
        assert "The model service did not accept the API key." in card.inner_text()
        assert "Hint: check OPENAI_API_KEY" in card.text_content()


def rate_limited(retry_after: str) -> Reply:
    reply = Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
    reply.headers["Retry-After"] = retry_after
    return reply


def test_429_with_retry_after_shows_the_countdown_then_the_answer(page: Any, db: str, fake: FakeServer) -> None:
    fake.enqueue(
        rate_limited("3"),
        Reply.sse(openai_text_stream("Back after the pause.")),
    )
    with ThreadServer(openai_app(fake.base_url, db, backoff=0.01)) as srv:
        page.goto(srv.url)
        send(page, "hi")
        status = page.get_by_test_id("retry-status")
        status.wait_for()
        first = status.inner_text()
        assert "retrying in" in first and "(429)" in first, first
        assert any(f"in {n} s" in first for n in (2, 3)), first  # Retry-After, not the 0.01 s backoff
        page.get_by_text("Back after the pause.").wait_for(timeout=10_000)
        assert page.get_by_test_id("retry-status").count() == 0
        idle(page)
    posts = fake.posts()
    assert len(posts) == 2


def slow_ticks(n: int, delay: float) -> Reply:
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({"content": f"tick {i} ... "}) for i in range(1, n + 1)]
    chunks.append(openai_chunk({}, finish_reason="stop"))
    body = openai_stream(chunks)
    pieces = body.split(b"\n\n")
    pieces = [p + b"\n\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    return Reply.sse(body, pieces=pieces, delay=delay)


def test_stop_keeps_the_partial_answer_marked_stopped_across_reload(page: Any, db: str, fake: FakeServer) -> None:
    fake.enqueue(slow_ticks(40, 0.15))
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "count slowly")
        page.get_by_text("tick 3").wait_for()
        page.get_by_test_id("stop").click()
        idle(page)
        body = page.get_by_test_id("message-assistant").locator(".body")
        assert "tick 1 ... tick 2 ... tick 3" in body.inner_text()
        assert page.get_by_test_id("stopped-mark").is_visible()
        assert page.get_by_test_id("error-card").count() == 0
        page.reload()
        page.get_by_test_id("stopped-mark").wait_for()
        assert "tick 1 ... tick 2 ... tick 3" in body.inner_text()
        assert "tick 40" not in body.inner_text()

    async def stored(store: Any) -> Any:
        segments = await store.session.segments((await store.ids())[0])
        return segments, await store.checkpointer.list_runs()

    segments, runs = inspect(db, stored)
    assert len(segments) == 1 and segments[0].meta.get("stopped") is True
    assert [e.type for e in segments[0].entries] == ["input", "assistant_text"]
    assert runs == []  # a stopped run's checkpoint is gone: it is finished, not resumable


def test_the_last_line_of_a_long_answer_is_in_view_and_scrolling_up_stops_following(
    page: Any, db: str, fake: FakeServer
) -> None:
    long = "\n\n".join(f"Paragraph {i}: " + "words " * 30 for i in range(1, 40)) + "\n\nTHE LAST LINE."
    fake.enqueue(Reply.sse(openai_text_stream(long)), Reply.sse(openai_text_stream(long.replace("LAST", "FINAL"))))
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "write a lot")
        page.get_by_text("THE LAST LINE.").wait_for()
        idle(page)
        page.wait_for_timeout(150)
        assert in_view(page, "THE LAST LINE.")
        page.get_by_test_id("jump-latest").wait_for(state="hidden")
        page.get_by_test_id("composer").focus()
        send(page, "again")
        page.get_by_text("THE FINAL LINE.").wait_for()
        idle(page)
        page.wait_for_timeout(150)
        assert in_view(page, "THE FINAL LINE.")
        page.locator("#messages").evaluate("(m) => { m.scrollTop = 0; m.dispatchEvent(new Event('scroll')); }")
        jump = page.get_by_test_id("jump-latest")
        jump.wait_for()
        jump.click()
        wait_for(lambda: in_view(page, "THE FINAL LINE."), timeout=5)


def in_view(page: Any, text: str) -> bool:
    return bool(
        page.evaluate(
            """(text) => {
                const box = document.getElementById('messages').getBoundingClientRect();
                const node = [...document.querySelectorAll('#messages p')].find((p) => p.textContent.includes(text));
                if (!node) return false;
                const r = node.getBoundingClientRect();
                return r.bottom <= box.bottom + 1 && r.top >= box.top - 1;
            }""",
            text,
        )
    )


def test_retry_on_the_error_card_sends_the_message_again(page: Any, db: str, fake: FakeServer) -> None:
    boom = Reply.json(500, {"error": {"message": "overloaded", "type": "server_error"}})
    fake.enqueue(boom, boom, Reply.sse(openai_text_stream("Worked the second time.")))
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "please answer")
        card = error_card(page)
        idle(page)
        assert "run_id" not in card.inner_text()  # no library instructions in what a person reads
        page.get_by_test_id("retry").click()
        page.get_by_text("Worked the second time.").wait_for()
        idle(page)
        assert page.get_by_test_id("error-card").count() == 0
        assert [t.strip() for t in page.get_by_test_id("message-user").locator(".body").all_inner_texts()] == [
            "please answer"
        ]


def test_a_partial_answer_stays_marked_while_its_call_is_retried(page: Any, db: str, fake: FakeServer) -> None:
    cut = slow_ticks(20, 0.2)
    cut.die_after = 4  # role chunk and three ticks, then the connection drops
    fake.enqueue(cut, Reply.sse(openai_text_stream("Fresh answer after the retry.")))
    with ThreadServer(openai_app(fake.base_url, db, backoff=2.0)) as srv:
        page.goto(srv.url)
        send(page, "count")
        page.get_by_text("tick 3").wait_for()
        old = page.get_by_test_id("superseded")
        old.wait_for()  # the cut attempt's text is still there, marked, during the wait
        assert "tick 1" in old.inner_text()
        page.get_by_test_id("retry-status").wait_for()
        page.get_by_text("Fresh answer after the retry.").wait_for(timeout=15_000)
        assert page.get_by_test_id("superseded").count() == 0  # replaced by the retry's own text
        idle(page)
        assert "tick" not in page.get_by_test_id("message-assistant").last.inner_text()


def test_the_page_shows_it_is_working_from_the_click_on(page: Any, db: str, fake: FakeServer) -> None:
    first_words = [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({"content": "Here it is."})]
    body = openai_stream([*first_words, openai_chunk({}, finish_reason="stop")])
    pieces = body.split(b"\n\n")
    pieces = [p + b"\n\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    fake.enqueue(Reply.sse(body, pieces=pieces, delay=2.0))  # a model slow to say its first word
    with ThreadServer(openai_app(fake.base_url, db)) as srv:
        page.goto(srv.url)
        send(page, "slow start")
        working = page.get_by_test_id("working")
        working.wait_for(timeout=1000)  # at once: not after the first token
        assert page.get_by_test_id("message-user").count() == 1
        page.get_by_text("Here it is.").wait_for()
        assert working.count() == 0
        idle(page)
