"""A failed run over the HTTP API: the error frame, the stored error, the failed checkpoint, and delete."""

from __future__ import annotations

import httpx

from lovia import Agent, RetryPolicy
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.web import create_app

from .helpers import ThreadServer, free_port, inspect_store, sse


def test_a_failed_run_is_stored_with_its_error_and_deleting_the_chat_drops_its_checkpoint(db: str) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    agent = Agent(
        name="assistant",
        model=OpenAIChatProvider("m", api_key="k", base_url=down),
        retry=RetryPolicy(max_attempts=1),
    )
    with ThreadServer(create_app(agent, db_path=db)) as srv:
        stream = sse(srv.url, "/api/chat/stream", {"message": "hello?"})
        assert stream.names()[-1] == "error"
        error = stream.of("error")[-1]
        sid = stream.of("session")[0]["session_id"]
        chat = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
        assert [e["type"] for e in chat["transcript"]] == ["input"]
        (run,) = chat["runs"]
        assert run["run_id"] == error["run_id"] and run["stopped"] is False
        assert run["error"]["type"] == "ProviderError" and "connection failed" in run["error"]["message"]
        history = httpx.get(f"{srv.url}/api/runs/history").json()["runs"]
        assert [r["status"] for r in history] == ["failed"]
        runs = inspect_store(db, lambda s: s.checkpointer.list_runs())
        assert [(r.run_id, r.status) for r in runs] == [(error["run_id"], "failed")]
        assert httpx.delete(f"{srv.url}/api/sessions/{sid}").status_code == 200
        assert inspect_store(db, lambda s: s.checkpointer.list_runs()) == []
