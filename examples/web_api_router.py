"""The lovia HTTP API inside your own FastAPI app, offline: no page, your prefix, your auth.

``build_api_router(deps)`` gives every ``/api/...`` route; the host app mounts it under
``/assistant`` behind a bearer-token dependency and keeps its own routes. The script sends a chat
message, lists the chats, and shows two error bodies. Run: ``python examples/web_api_router.py``.
"""

from __future__ import annotations

import asyncio
import json

import httpx
from fastapi import Depends, FastAPI

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore, RouterDeps, build_api_router, token_dependency
from lovia.web.auth import HostOriginGuard, HostPolicy

agent = Agent(name="helper", model=ScriptedProvider(lambda entries, tools: text("Hello from the mounted API.")))
deps = RouterDeps(agents={"helper": agent}, store=ChatStore.in_memory())

app = FastAPI(lifespan=deps.lifespan)  # the lifespan runs the scheduler and winds runs down
app.add_middleware(HostOriginGuard, policy=HostPolicy())  # DNS-rebinding and cross-site defence
app.include_router(build_api_router(deps), prefix="/assistant", dependencies=[Depends(token_dependency("s3cret"))])


@app.get("/status")
async def status() -> dict[str, str]:
    """A route of the host app itself."""
    return {"app": "mine"}


async def main() -> None:
    auth = {"Authorization": "Bearer s3cret"}
    transport = httpx.ASGITransport(app=app)
    async with deps.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        # httpx's in-process transport does not run the app's lifespan, so the script enters it.
        r = await client.post("/assistant/api/chat/stream", json={"message": "hi"}, headers=auth)
        events = [line.removeprefix("event: ") for line in r.text.splitlines() if line.startswith("event: ")]
        answer = "".join(
            json.loads(line.removeprefix("data: "))["delta"]
            for line in r.text.splitlines()
            if line.startswith("data: ") and '"delta"' in line
        )
        print("stream events:", ", ".join(dict.fromkeys(events)))  # each kind once, in order
        print("answer:", answer)
        sessions = (await client.get("/assistant/api/sessions", headers=auth)).json()
        print("chats:", [s["title"] for s in sessions])
        missing = await client.patch("/assistant/api/sessions/nope", headers=auth, json={"title": "x"})
        print("unknown chat:", missing.status_code, missing.json()["detail"]["code"])
        anonymous = await client.get("/assistant/api/sessions")
        print("no token:", anonymous.status_code, anonymous.json()["detail"]["code"])
        print("host route:", (await client.get("/status")).json())


if __name__ == "__main__":
    asyncio.run(main())
