"""Gated tool calls in your own stream loop, decided later by chat id (offline, scripted model).

Run it: ``python examples/web_approvals.py``.

Two chats ask for the same gated tool; their scripted models even use the same call id. Each
chat's stream loop hands the ``ApprovalRequired`` event to one ``ApprovalRegistry`` and waits. An
operator (here a task; in an app, a ``POST /approve`` route) approves one chat's call and denies
the other's. The approved call runs once; the denied one never runs and the model is told so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web.approvals import ApprovalRegistry


@tool(needs_approval=True)
def restart_service(name: str) -> str:
    """Restart a production service."""
    print(f"  (restarting {name})")
    return f"{name} restarted"


def ops_agent(service: str) -> Agent[Any]:
    script = [call("restart_service", {"name": service}, call_id="call_1"), text(f"Done with {service}.")]
    return Agent(name="ops", model=ScriptedProvider(script), tools=[restart_service])


async def chat_stream(registry: ApprovalRegistry, session_id: str, service: str) -> None:
    """What a chat's streaming route does: forward events, wait on the gated ones."""
    handle = Runner.stream(ops_agent(service), f"restart {service}")
    async for event in handle:
        if isinstance(event, events.ApprovalRequired):
            print(f"{session_id}: waiting for approval of {event.call.name}({event.call.arguments})")
            decided = await registry.await_decision(session_id, event)
            print(f"{session_id}: {'approved' if decided else 'denied'}")
    result = await handle
    print(f"{session_id}: tool result {result.entries[2].output!r}; answer {result.output!r}")


async def main() -> None:
    registry = ApprovalRegistry()
    chats = [
        asyncio.create_task(chat_stream(registry, "chat_billing", "billing")),
        asyncio.create_task(chat_stream(registry, "chat_search", "search")),
    ]
    while not (registry.pending("chat_billing") and registry.pending("chat_search")):
        await asyncio.sleep(0.01)
    print("pending:", {sid: registry.pending(sid) for sid in ("chat_billing", "chat_search")})
    # The operator's two requests: same call id, different chats.
    await registry.resolve("chat_billing", "call_1", True)
    await registry.resolve("chat_search", "call_1", False)
    await asyncio.gather(*chats)
    print("still pending:", registry.pending("chat_billing") + registry.pending("chat_search"))


if __name__ == "__main__":
    asyncio.run(main())
