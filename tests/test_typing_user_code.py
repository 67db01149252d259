"""Typed user code written against the documented API type-checks under ``mypy --strict``.

``RunContext.agent``, ``RunResult.final_agent``, ``Handoff.target`` and the event fields are typed
``AgentLike`` (a protocol, so the package has no import cycle; see ``lovia/_agent_protocol.py``),
where the reference documents ``Agent[Any]``. These tests write user modules to a temporary
directory and run the real mypy on them, with this checkout's ``lovia`` first on ``MYPYPATH`` and
the library's own modules checked silently (as for an installed package):

* the documented patterns (running ``final_agent`` again, handoffs, reading every documented
  ``Agent`` field and method through ``ctx.agent``, ``final_agent`` and the events) pass;
* a module with three real mistakes fails with exactly those three errors, so the first test
  is not passing because mypy checks nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lovia import Agent, Runner, UserError
from lovia.agent import AgentLike, as_agent
from lovia.testing import ScriptedProvider, call, text

ROOT = Path(__file__).resolve().parent.parent
SURFACE = json.loads((ROOT / "tests" / "fixtures" / "public_surface.json").read_text(encoding="utf-8"))
DOCUMENTED_AGENT = SURFACE["lovia.agent"]["names"]["Agent"]
FIELDS = sorted(DOCUMENTED_AGENT["fields"])
METHODS = sorted(DOCUMENTED_AGENT["methods"])


@pytest.fixture(scope="module")
def mypy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("user_code")
    (where / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    return where


def run_mypy(where: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    path = where / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["MYPYPATH"] = str(ROOT)
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(where / "mypy.ini"),
        "--strict",
        "--follow-imports=silent",
        "--cache-dir",
        str(where / ".mypy_cache"),
        "--show-error-codes",
        "--no-color-output",
        path.name,
    ]
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=600)


def _reads(expr: str) -> str:
    """Lines reading every documented field and method of ``Agent`` through ``expr``."""
    return "\n".join(f"    _ = {expr}.{member}" for member in FIELDS + METHODS)


USER_CODE = f'''
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lovia import (
    Agent,
    Handoff,
    ModelSettings,
    Provider,
    RetryPolicy,
    RunContext,
    RunHandle,
    Runner,
    RunResult,
    Tool,
    events,
    tool,
)
from lovia.agent import AgentLike, as_agent
from lovia.handoff import agent_as_tool


@dataclass
class Deps:
    user: str


@tool
def whoami(ctx: RunContext[Deps]) -> str:
    """The user and the agent answering."""
    agent_name: str = ctx.agent.name
    model: str | Provider | None = ctx.agent.model
    deps = ctx.deps
    return f"{{deps.user if deps else '?'}} via {{agent_name}} ({{model}})"


def reads_ctx(ctx: RunContext[Any]) -> None:
{_reads("ctx.agent")}


def reads_result(result: RunResult[Any]) -> None:
{_reads("result.final_agent")}


def typed_fields(agent: AgentLike) -> None:
    name: str = agent.name
    settings: ModelSettings = agent.settings
    retry: RetryPolicy | None = agent.retry
    tools: list[Tool[Any]] = agent.tools
    handoffs: list[Agent[Any] | Handoff] = agent.handoffs
    output_type: Any = agent.output_type
    renderer: Callable[[Any, Any], str] | None = agent.tool_result_renderer
    retries: int = agent.default_tool_retries
    timeout: float | None = agent.default_tool_timeout
    limit: int | None = agent.max_tool_output_chars
    print(name, settings, retry, tools, handoffs, output_type, renderer, retries, timeout, limit)


refunds: Agent[Deps] = Agent(name="refunds", model="openai:gpt-4o-mini", tools=[whoami])
triage: Agent[Deps] = Agent(
    name="triage",
    handoffs=[Handoff(target=refunds, description="refund questions"), refunds],
)
also_triage: Agent[Deps] = triage.clone(name="triage-2")
as_a_tool: Tool[Any] = agent_as_tool(refunds)


async def conversation(deps: Deps) -> str:
    first = await Runner.run(triage, "I want a refund", deps=deps)
    second = await Runner.run(first.final_agent, "thanks", deps=deps)
    third = await Runner.run(second.final_agent.clone(name="follow-up"), "one more", deps=deps)
    again = Handoff(target=third.final_agent)
    helper: Agent[Deps] = Agent(name="helper", tools=[third.final_agent.as_tool(name="ask_previous")], handoffs=[again])
    handle: RunHandle[Any] = Runner.stream(third.final_agent, "stream it", deps=deps)
    async for event in handle:
        if isinstance(event, (events.RunStarted, events.TurnStarted, events.TurnEnded)):
            print(event.agent.name, event.agent.model)
        elif isinstance(event, events.HandoffOccurred):
            print(event.from_agent.name, "->", event.to_agent.name, event.to_agent.settings)
    streamed = await handle.result()
    shortcut = await streamed.final_agent.run("via the agent's own shortcut", deps=deps)
    exact: Agent[Any] = as_agent(streamed.final_agent)
    if isinstance(streamed.final_agent, Agent):
        narrowed: Agent[Any] = streamed.final_agent
        print(narrowed.name)
    print(helper.name, exact.name, shortcut, first.output)
    return str(streamed.output)


def blocking(result: RunResult[Any], ctx: RunContext[Any]) -> Any:
    again = Runner.run_sync(result.final_agent, "next", deps=Deps("ann"))
    prompt = asyncio.run(again.final_agent.render_system_prompt(ctx))
    provider: Provider = again.final_agent.resolve_provider()
    print(prompt, provider)
    return again.output
'''

MISTAKES = """
from __future__ import annotations

from typing import Any

from lovia import Runner, RunResult


async def wrong(result: RunResult[Any]) -> None:
    count: int = result.final_agent.name
    print(result.final_agent.nmae)
    await Runner.run("not an agent", "hello")
"""


def test_agent_like_carries_every_documented_agent_member() -> None:
    assert FIELDS and METHODS
    missing = [member for member in FIELDS + METHODS if not hasattr(AgentLike, member)]
    assert not missing, f"AgentLike lacks documented Agent members: {missing}"


def test_documented_user_code_type_checks_strictly(mypy_dir: Path) -> None:
    done = run_mypy(mypy_dir, "user_code", USER_CODE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_the_check_fails_on_real_mistakes(mypy_dir: Path) -> None:
    done = run_mypy(mypy_dir, "mistakes", MISTAKES)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    lines = sorted(int(m.group(1)) for e in errors if (m := re.match(r"mistakes\.py:(\d+):", e)))
    assert len(lines) == len(errors), done.stdout
    assert lines == [10, 11, 12], done.stdout
    assert '"str", variable has type "int"' in done.stdout
    assert '"AgentLike" has no attribute "nmae"' in done.stdout
    assert 'Argument 1 to "run" of "Runner" has incompatible type "str"' in done.stdout


async def test_final_agent_goes_back_into_the_runner_as_it_is() -> None:
    billing_provider = ScriptedProvider([text("Billing here."), text("Still billing.")])
    billing = Agent(name="Billing", model=billing_provider)
    triage = Agent(
        name="Triage", model=ScriptedProvider([call("transfer_to_billing", {"reason": "refund"})]), handoffs=[billing]
    )
    first = await Runner.run(triage, "I want a refund")
    assert first.final_agent is billing and as_agent(first.final_agent) is billing
    second = await Runner.run(first.final_agent, "and now?")
    assert second.output == "Still billing." and second.final_agent is billing
    assert len(billing_provider.calls) == 2


class _LooksLikeAnAgent:
    name = "impostor"


async def test_a_value_that_is_not_an_agent_is_refused_with_a_hint() -> None:
    with pytest.raises(UserError) as caught:
        as_agent(_LooksLikeAnAgent())  # type: ignore[arg-type]
    assert "expected an Agent, got _LooksLikeAnAgent" in str(caught.value) and caught.value.hint
    with pytest.raises(UserError) as refused:
        await Runner.run(_LooksLikeAnAgent(), "hello")  # type: ignore[arg-type]
    assert "expected an Agent" in str(refused.value) and refused.value.hint
