"""``build_events_router`` mounted on its own: the hello frame, live notifications, the end at shutdown."""

from __future__ import annotations

import threading

import httpx
from fastapi import FastAPI

from lovia.web import ChatStore
from lovia.web.api import RouterDeps
from lovia.web.api.events import build_events_router

from .helpers import Frame, ThreadServer, iter_frames, scripted_agent, wait_for


def test_the_events_router_alone_streams_hello_then_notifications_and_ends_at_shutdown() -> None:
    deps = RouterDeps(agents={"bot": scripted_agent(name="bot")}, store=ChatStore.in_memory())
    app = FastAPI(lifespan=deps.lifespan)
    app.include_router(build_events_router(deps), prefix="/x")
    # uvicorn waits for open streams before the lifespan exits; lovia's server class ends them
    # first when it finds the deps on app.state (create_app sets it; a host app sets it itself).
    app.state.lovia = deps
    assert set(app.openapi()["paths"]) == {"/x/api/events"}

    @app.post("/poke")  # the host app's own route publishes on the supervisor's hub, in its loop
    async def poke() -> dict[str, bool]:
        deps.emit("session_created", {"session": {"id": "chat_1"}})
        return {"ok": True}

    frames: list[Frame] = []
    ended = threading.Event()
    server = ThreadServer(app)

    def read() -> None:
        try:
            with httpx.Client(timeout=30) as client, client.stream("GET", server.url + "/x/api/events") as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                frames.extend(iter_frames(r))
        finally:
            ended.set()

    with server:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        wait_for(lambda: [f.event for f in frames][:1] == ["hello"])
        assert frames[0].data == {"live": []}
        assert httpx.post(server.url + "/poke").json() == {"ok": True}
        wait_for(lambda: any(f.event == "session_created" for f in frames))
        assert [f.data for f in frames if f.event == "session_created"] == [{"session": {"id": "chat_1"}}]
        assert not ended.is_set()
    assert ended.wait(10), "the stream did not end when the server shut down"
    reader.join(5)
    assert not reader.is_alive()
