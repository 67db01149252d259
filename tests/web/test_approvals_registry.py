"""ApprovalRegistry: a stream loop waits on a gated call; another task decides it by chat and call id."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web.approvals import ApprovalRegistry

RAN: list[str] = []


@tool(needs_approval=True)
def wipe(target: str) -> str:
    """Delete everything under target."""
    RAN.append(target)
    return f"wiped {target}"


def agent(target: str) -> Agent[Any]:
    provider = ScriptedProvider([call("wipe", {"target": target}, call_id="call_1"), text("ok")])
    return Agent(name="ops", model=provider, tools=[wipe])


async def drive(registry: ApprovalRegistry, session_id: str, target: str) -> Any:
    handle = Runner.stream(agent(target), "go")
    async for event in handle:
        if isinstance(event, events.ApprovalRequired):
            await registry.await_decision(session_id, event)
    return await handle


async def until_pending(registry: ApprovalRegistry, *session_ids: str) -> None:
    for _ in range(500):
        if all(registry.pending(s) for s in session_ids):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no pending call in {session_ids}")


async def test_equal_call_ids_of_two_chats_are_decided_apart() -> None:
    RAN.clear()
    registry = ApprovalRegistry()
    a = asyncio.create_task(drive(registry, "chat_a", "/tmp/a"))
    b = asyncio.create_task(drive(registry, "chat_b", "/tmp/b"))
    await until_pending(registry, "chat_a", "chat_b")
    assert registry.pending("chat_a") == registry.pending("chat_b") == ["call_1"]
    assert RAN == []  # nothing runs before its decision

    assert await registry.resolve("chat_a", "call_1", True) is True
    assert await registry.resolve("chat_b", "call_1", False) is True
    result_a, result_b = await asyncio.wait_for(asyncio.gather(a, b), 10)

    assert RAN == ["/tmp/a"]
    assert result_a.entries[2].output == "wiped /tmp/a" and not result_a.entries[2].is_error
    assert result_b.entries[2].is_error  # denied: the model is told, the tool never ran
    assert registry.pending("chat_a") == registry.pending("chat_b") == []


async def test_an_unknown_or_decided_call_is_not_resolved() -> None:
    registry = ApprovalRegistry()
    assert await registry.resolve("chat_a", "call_1", True) is False
    task = asyncio.create_task(drive(registry, "chat_a", "/tmp/x"))
    await until_pending(registry, "chat_a")
    assert await registry.resolve("chat_other", "call_1", True) is False  # another chat's id space
    assert await registry.resolve("chat_a", "call_1", False) is True
    await asyncio.wait_for(task, 10)
    assert await registry.resolve("chat_a", "call_1", True) is False  # decided already


async def test_a_cancelled_wait_denies_the_call_and_leaves_nothing_pending() -> None:
    RAN.clear()
    registry = ApprovalRegistry()
    handle = Runner.stream(agent("/tmp/c"), "go")
    seen: list[events.ApprovalRequired] = []

    async def consume() -> None:
        async for event in handle:
            if isinstance(event, events.ApprovalRequired):
                seen.append(event)
                await registry.await_decision("chat_c", event)

    waiter = asyncio.create_task(consume())
    await until_pending(registry, "chat_c")
    waiter.cancel()  # the client went away mid-wait
    await asyncio.gather(waiter, return_exceptions=True)
    assert registry.pending("chat_c") == []
    assert seen and seen[0]._decision is not None and seen[0]._decision.done()
    await asyncio.sleep(0)
    assert seen[0]._decision.result() is False  # failed closed
    assert RAN == []


async def test_release_denies_one_chat_and_spares_the_others() -> None:
    RAN.clear()
    registry = ApprovalRegistry()
    a = asyncio.create_task(drive(registry, "chat_a", "/tmp/a"))
    b = asyncio.create_task(drive(registry, "chat_b", "/tmp/b"))
    await until_pending(registry, "chat_a", "chat_b")
    await registry.release("chat_a")
    result_a = await asyncio.wait_for(a, 10)
    assert result_a.entries[2].is_error and registry.pending("chat_b") == ["call_1"]
    registry.deny_pending("chat_b")
    result_b = await asyncio.wait_for(b, 10)
    assert result_b.entries[2].is_error and RAN == []
