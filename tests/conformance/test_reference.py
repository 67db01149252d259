"""Conformance of lovia's public API, transcript model and loop order to the reference.

Written from /work/shared/spec/reference.md sections 1-3 (minus P2 plugins, provider HTTP details
and the web layer) and the sessions-and-checkpoints seed, which wins where the two disagree.
Each test states one or more documented facts; the model is always ``lovia.testing.ScriptedProvider``
and the stores are the bundled ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

import lovia
from lovia import (
    Agent,
    AgentHooks,
    CancelToken,
    CheckpointOptions,
    Compaction,
    FilePart,
    Handoff,
    ImagePart,
    InMemoryCheckpointer,
    InMemorySession,
    Mailbox,
    Message,
    ModelSettings,
    PluginInstance,
    RetryPolicy,
    RunBudget,
    RunContext,
    RunHandle,
    RunHead,
    Runner,
    RunResult,
    RunSnapshot,
    Segment,
    SQLiteCheckpointer,
    SQLiteSession,
    TextPart,
    Tool,
    Usage,
    assistant,
    events,
    system,
    tool,
    user,
)
from lovia.exceptions import (
    BudgetExceeded,
    ContextOverflowError,
    GuardrailTripped,
    InvalidToolArguments,
    LoviaError,
    MaxTurnsExceeded,
    MCPError,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    ToolError,
    UserError,
)
from lovia.messages import ToolCall
from lovia.testing import ScriptedProvider, batch, call, fail, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    drop_dangling_tool_calls,
    entries_to_messages,
    entry_from_dict,
    entry_to_dict,
    input_to_entries,
    leading_system_count,
    messages_to_entries,
    safe_window,
    split_system,
)

# --------------------------------------------------------------------------- helpers


def names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def kwonly(fn: Any) -> dict[str, Any]:
    return {
        p.name: p.default for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def mk(provider: ScriptedProvider, *tools: Tool[Any], name: str = "main", **kw: Any) -> Agent[Any]:
    return Agent(name=name, instructions="Be brief.", model=provider, tools=list(tools), **kw)


async def collect(handle: RunHandle[Any]) -> list[events.Event]:
    return [ev async for ev in handle]


def kinds(evs: list[Any]) -> list[str]:
    return [type(e).__name__ for e in evs]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


async def _no_sleep(_s: float) -> None:
    return None


NO_WAIT = RetryPolicy(sleep=_no_sleep)


class RecordingCheckpointer(InMemoryCheckpointer):
    """The bundled in-memory checkpointer, logging every append into a shared log."""

    def __init__(self, log: list[Any]) -> None:
        super().__init__()
        self.log = log

    async def append(self, run_id, entries, head):  # type: ignore[override]
        self.log.append(("cp", tuple(e.type for e in entries), head.status))
        await super().append(run_id, entries, head)


class RecordingSession(InMemorySession):
    def __init__(self, log: list[Any]) -> None:
        super().__init__()
        self.log = log

    async def append(self, session_id, entries, *, run_id=None, meta=None):  # type: ignore[override]
        self.log.append(("session", len(entries)))
        return await super().append(session_id, entries, run_id=run_id, meta=meta)


def logging_hooks(log: list[Any]) -> AgentHooks:
    hooks = AgentHooks()

    @hooks.on_any
    def record(event: Any, ctx: Any) -> None:
        log.append(("ev", type(event).__name__))

    return hooks


# =========================================================================== 1.1 exports

CORE_EXPORTS = [
    "Agent", "Runner", "RunContext", "RunResult", "RunHandle", "Tool", "tool", "Handoff", "AgentHooks", "events",
    "Message", "Usage", "system", "user", "assistant", "TextPart", "ImagePart", "FilePart", "TranscriptEntry",
    "Session", "Segment", "SQLiteSession", "InMemorySession", "Checkpointer", "CheckpointOptions", "RunSnapshot",
    "RunHead", "SQLiteCheckpointer", "InMemoryCheckpointer",
    "Compaction", "ContextPolicy", "ResultStore", "FileResultStore", "InMemoryResultStore",
    "RunBudget", "RetryPolicy", "CancelToken", "Mailbox",
    "Provider", "ModelSettings", "OpenAIChatProvider", "AnthropicProvider", "model_from_env",
    "Plugin", "PluginInstance",
    "LoviaError", "UserError", "ProviderError", "ContextOverflowError", "ToolError", "InvalidToolArguments",
    "OutputValidationError", "MaxTurnsExceeded", "BudgetExceeded", "RunCancelled", "GuardrailTripped", "MCPError",
    "enable_logging", "__version__",
]  # fmt: skip


@pytest.mark.parametrize("name", CORE_EXPORTS)
def test_top_level_export(name: str) -> None:
    assert name in lovia.__all__
    assert hasattr(lovia, name)


def test_events_is_a_module_export() -> None:
    assert inspect.ismodule(lovia.events) and lovia.events is importlib.import_module("lovia.events")


@pytest.mark.parametrize(
    "module",
    [
        "lovia.events", "lovia.transcript", "lovia.testing", "lovia.context", "lovia.tools", "lovia.tools.recall",
        "lovia.hooks", "lovia.tracing", "lovia.providers", "lovia.providers.base", "lovia.stores",
        "lovia.exceptions", "lovia.plugins",
    ],
)  # fmt: skip
def test_public_submodules_import(module: str) -> None:
    importlib.import_module(module)


def test_settings_and_compaction_reexports() -> None:
    from lovia.context import Compaction as C2
    from lovia.providers.base import ModelSettings as MS2

    assert MS2 is ModelSettings and C2 is Compaction


def test_lovia_tools_helpers() -> None:
    import lovia.tools as t

    for helper in [
        "make_recall_tool", "truncate_tool_output", "render_tool_result", "default_result_renderer",
        "apply_tool_policies", "run_tool", "tool", "Tool",
    ]:  # fmt: skip
        assert callable(getattr(t, helper)), helper


# =========================================================================== 1.2 Agent

AGENT_FIELDS = [
    "name", "instructions", "model", "tools", "output_type", "output_repair", "handoffs", "settings", "retry",
    "context_policy", "workspace", "plugins", "hooks", "approval_handler", "input_guardrails", "output_guardrails",
    "default_tool_retries", "default_tool_timeout", "max_tool_output_chars", "tool_result_renderer",
]  # fmt: skip


def test_agent_is_a_generic_dataclass_with_documented_fields_in_order() -> None:
    assert dataclasses.is_dataclass(Agent)
    assert names(Agent)[: len(AGENT_FIELDS)] == AGENT_FIELDS
    Agent[int]  # generic: subscriptable
    first = dataclasses.fields(Agent)[0]
    assert first.default is dataclasses.MISSING and first.default_factory is dataclasses.MISSING  # name required


def test_agent_defaults() -> None:
    a = Agent(name="a")
    assert a.instructions == ""
    assert a.model is None
    assert a.tools == [] and a.handoffs == [] and a.plugins == []
    assert a.output_type is str
    assert a.output_repair is True
    assert a.settings == ModelSettings()
    assert a.retry == RetryPolicy()
    assert isinstance(a.context_policy, Compaction)
    assert a.workspace is None and a.hooks is None and a.approval_handler is None
    assert a.input_guardrails == [] and a.output_guardrails == []
    assert a.default_tool_retries == 0
    assert a.default_tool_timeout is None
    assert a.max_tool_output_chars == 200_000
    assert a.tool_result_renderer is None
    b = Agent(name="b")
    assert a.tools is not b.tools  # mutable defaults are per instance


def test_agent_clone_shares_referenced_objects() -> None:
    a = Agent(name="a", instructions="x")
    b = a.clone(instructions="y")
    assert b is not a and b.instructions == "y" and a.instructions == "x"
    assert b.context_policy is a.context_policy


def test_agent_methods_exist() -> None:
    a = Agent(name="a")
    for m in ["clone", "instruction", "with_instructions", "as_tool", "run", "run_sync", "stream"]:
        assert callable(getattr(a, m)), m
    assert kwonly(Agent.as_tool) == {
        "name": None, "description": None, "max_turns": 50, "budget": None, "retry": None, "context_policy": None,
    }  # fmt: skip


async def test_missing_model_is_user_error_at_run_time() -> None:
    with pytest.raises(UserError):
        await Runner.run(Agent(name="a"), "hi")


async def test_system_prompt_composition_order() -> None:
    class Plug:
        name = "plug"

        async def setup(self) -> PluginInstance:
            return PluginInstance(instructions="PLUGIN")

    @dataclass
    class Out:
        x: int

    provider = ScriptedProvider([text('{"x": 1}')])
    agent = Agent(name="a", instructions="BASE", model=provider, plugins=[Plug()], output_type=Out)

    @agent.instruction
    def frag(ctx: RunContext[Any]) -> str:
        return "FRAGMENT"

    @agent.instruction
    def empty(ctx: RunContext[Any]) -> str:
        return ""  # skipped

    result = await Runner.run(agent, "hi", extra_instructions="EXTRA")
    assert result.output == Out(1)
    prompt = provider.calls[0][0]
    assert prompt.role == "system"
    body = prompt.text
    assert body.startswith("BASE\n\nFRAGMENT\n\nEXTRA\n\nPLUGIN\n\n")
    assert body.index("PLUGIN") < body.lower().index("output format")
    assert "\n\n\n\n" not in body  # the empty fragment leaves no gap


async def test_instructions_callable_sync_and_async_and_with_instructions() -> None:
    async def dynamic(ctx: RunContext[Any]) -> str:
        return f"deps={ctx.deps}"

    provider = ScriptedProvider([text("ok")])
    base = Agent(name="a", instructions=dynamic, model=provider)
    derived = base.with_instructions(lambda ctx: "MORE")
    await Runner.run(derived, "hi", deps=7)
    assert provider.calls[0][0].text == "deps=7\n\nMORE"
    # with_instructions is functional: the original gained nothing
    provider2 = ScriptedProvider([text("ok")])
    await Runner.run(base.clone(model=provider2), "hi", deps=1)
    assert provider2.calls[0][0].text == "deps=1"


async def test_instruction_decorator_is_copy_on_register() -> None:
    a = Agent(name="a", instructions="A")
    before = a.clone()

    @a.instruction
    def more(ctx: Any) -> str:
        return "B"

    assert callable(more)  # the decorator hands the function back
    after = a.clone()
    prompts = []
    for agent in (before, a, after):
        provider = ScriptedProvider([text("ok")])
        await Runner.run(agent.clone(model=provider), "hi")
        prompts.append(provider.calls[0][0].text)
    assert prompts == ["A", "A\n\nB", "A\n\nB"]


async def test_handoff_and_as_tool_names_derive_from_agent_name() -> None:
    target = Agent(name="Billing Team", model=ScriptedProvider([]))
    as_tool = target.as_tool()
    assert as_tool.name == "ask_billing_team"
    assert list(as_tool.parameters["properties"]) == ["input"]
    provider = ScriptedProvider([text("done")])
    main = mk(provider, handoffs=[target])
    await Runner.run(main, "hi")
    tools = [t.name for t in provider.requests[0].tools]
    assert "transfer_to_billing_team" in tools


# =========================================================================== 1.3 Runner

RUN_KWARGS = {
    "deps": None, "output_type": None, "extra_instructions": None, "max_turns": 50, "budget": None,
    "cancel_token": None, "mailbox": None, "retry": None, "context_policy": None, "session": None,
    "session_id": None, "checkpoint": None, "tracer": None, "context": None,
}  # fmt: skip


@pytest.mark.parametrize("method", ["run", "stream", "run_sync"])
def test_runner_entry_points_share_keywords(method: str) -> None:
    fn = getattr(Runner, method)
    assert isinstance(inspect.getattr_static(Runner, method), staticmethod)
    params = list(inspect.signature(fn).parameters)
    assert params[:2] == ["agent", "input"]
    assert kwonly(fn) == RUN_KWARGS


def test_runner_run_is_async_and_stream_is_sync() -> None:
    assert inspect.iscoroutinefunction(Runner.run)
    assert not inspect.iscoroutinefunction(Runner.stream)


def test_run_sync_outside_a_loop() -> None:
    result = Runner.run_sync(mk(ScriptedProvider([text("hi there")])), "hi")
    assert result.output == "hi there"


async def test_run_sync_inside_a_running_loop_is_user_error_with_hint() -> None:
    with pytest.raises(UserError) as info:
        Runner.run_sync(mk(ScriptedProvider([text("x")])), "hi")
    assert info.value.hint


async def test_stream_returns_a_handle_synchronously() -> None:
    handle = Runner.stream(mk(ScriptedProvider([text("x")])), "hi")
    assert isinstance(handle, RunHandle)
    assert (await handle).output == "x"


async def test_max_turns_default_50_raises_max_turns_exceeded() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}) for _ in range(51)])
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(mk(provider, add), "loop")
    assert len(provider.calls) == 50


async def test_max_turns_override() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}) for _ in range(3)])
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(mk(provider, add), "loop", max_turns=2)
    assert len(provider.calls) == 2


async def test_input_as_message_list() -> None:
    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(mk(provider), [system("extra rule"), user("hello")])
    assert [m.role for m in provider.calls[0]] == ["system", "system", "user"]
    assert result.entries == [InputEntry("system", "extra rule"), InputEntry("user", "hello"), AssistantTextEntry("ok")]


async def test_context_is_deps_and_control_objects_always_present() -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(ctx: RunContext[Any]) -> str:
        """Probe."""
        seen.update(deps=ctx.deps, context=ctx.context, cancel=ctx.cancel_token, mailbox=ctx.mailbox)
        return "ok"

    deps = object()
    await Runner.run(mk(ScriptedProvider([call("probe"), text("x")]), probe), "hi", deps=deps)
    assert seen["deps"] is deps and seen["context"] is deps
    assert isinstance(seen["cancel"], CancelToken) and isinstance(seen["mailbox"], Mailbox)


async def test_supplied_cancel_token_and_mailbox_are_used() -> None:
    token, box = CancelToken(), Mailbox()
    seen: dict[str, Any] = {}

    @tool
    def probe(ctx: RunContext[Any]) -> str:
        """Probe."""
        seen.update(cancel=ctx.cancel_token, mailbox=ctx.mailbox)
        return "ok"

    await Runner.run(mk(ScriptedProvider([call("probe"), text("x")]), probe), "hi", cancel_token=token, mailbox=box)
    assert seen["cancel"] is token and seen["mailbox"] is box


async def test_output_type_override_is_run_wide() -> None:
    provider = ScriptedProvider([text("42")])
    result = await Runner.run(mk(provider), "n?", output_type=int)
    assert result.output == 42


async def test_session_loads_history_and_appends_on_success() -> None:
    session = InMemorySession()
    p1 = ScriptedProvider([text("Noted: Atlas.")])
    r1 = await Runner.run(mk(p1), "My project is Atlas.", session=session, session_id="u1")
    p2 = ScriptedProvider([text("Atlas")])
    r2 = await Runner.run(mk(p2), "Project name?", session=session, session_id="u1")
    assert [m.text for m in p2.calls[0]] == ["Be brief.", "My project is Atlas.", "Noted: Atlas.", "Project name?"]
    segs = await session.segments("u1")
    assert [s.entries for s in segs] == [r1.entries, r2.entries]
    assert await session.load("u1") == r1.entries + r2.entries
    # the system head is never stored
    assert all(not (isinstance(e, InputEntry) and e.role == "system") for e in await session.load("u1"))


# =========================================================================== 1.4 RunHandle / RunResult


async def test_handle_iterates_once() -> None:
    handle = Runner.stream(mk(ScriptedProvider([text("x")])), "hi")
    await collect(handle)
    with pytest.raises(RuntimeError):
        async for _ in handle:
            pass


async def test_await_handle_equals_result() -> None:
    handle = Runner.stream(mk(ScriptedProvider([text("x")])), "hi")
    evs = await collect(handle)
    r1 = await handle
    r2 = await handle.result()
    assert r1.output == r2.output == "x"
    assert isinstance(evs[-1], events.RunCompleted) and evs[-1].result is r1


async def test_result_drives_the_run_when_nobody_iterates() -> None:
    handle = Runner.stream(mk(ScriptedProvider([text("drive")])), "hi")
    assert (await handle.result()).output == "drive"


async def test_abandoned_iteration_makes_result_raise() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3")])
    handle = Runner.stream(mk(provider, add), "hi")
    async for ev in handle:
        if isinstance(ev, events.TurnStarted):
            break
    with pytest.raises(Exception):  # noqa: B017 - any error: there is no partial result
        await handle.result()


async def test_iteration_never_raises_and_ends_with_exactly_one_terminal_event() -> None:
    provider = ScriptedProvider([fail(ProviderError("boom", retryable=False))])
    handle = Runner.stream(mk(provider), "hi")
    evs = await collect(handle)
    terminals = [e for e in evs if isinstance(e, (events.RunCompleted, events.RunFailed))]
    assert terminals == [evs[-1]] and isinstance(evs[-1], events.RunFailed)
    assert isinstance(evs[-1].error, ProviderError)
    with pytest.raises(ProviderError):
        await handle.result()


async def test_handle_cancel_and_approvals() -> None:
    from lovia.approvals import ApprovalChannel

    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        gate.set()
        await asyncio.sleep(5)
        return "late"

    handle = Runner.stream(mk(ScriptedProvider([call("slow"), text("never")]), slow), "hi")
    assert isinstance(handle.approvals, ApprovalChannel)
    assert "reason" in inspect.signature(handle.cancel).parameters
    evs: list[Any] = []
    async for ev in handle:
        evs.append(ev)
        if isinstance(ev, events.ToolCallStarted):
            await gate.wait()
            handle.cancel("stop now")
    assert isinstance(evs[-1], events.RunFailed) and isinstance(evs[-1].error, RunCancelled)
    with pytest.raises(RunCancelled):
        await handle


async def test_task_cancellation_propagates_as_base_exception() -> None:
    provider = ScriptedProvider([text("slow answer", delay=0.05)])
    task = asyncio.ensure_future(Runner.run(mk(provider), "hi"))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_run_result_fields() -> None:
    assert names(RunResult)[:6] == ["output", "entries", "final_agent", "usage", "turns", "finish_reason"]
    assert isinstance(inspect.getattr_static(RunResult, "messages"), property)


async def test_run_result_values() -> None:
    provider = ScriptedProvider([call("add", {"a": 2, "b": 3}), text("5")])
    agent = mk(provider, add)
    result = await Runner.run(agent, "2+3?")
    assert result.output == "5"
    assert result.final_agent is agent
    assert result.turns == 2
    assert result.finish_reason == "stop"
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[1].tool_calls == [ToolCall("call_add", "add", '{"a": 2, "b": 3}')]
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens
    assert result.usage.input_tokens > 0


async def test_empty_reply_ends_with_empty_output() -> None:
    result = await Runner.run(mk(ScriptedProvider([text("")])), "hi")
    assert result.output == "" and result.turns == 1


# =========================================================================== 1.5 RunContext

CTX_FIELDS = [
    "context", "entries", "agent", "usage", "turn", "session_id", "run_id", "budget", "workspace",
    "cancel_token", "mailbox", "system_prompt",
]  # fmt: skip


def test_run_context_fields() -> None:
    assert set(CTX_FIELDS) <= set(names(RunContext))
    for prop in ["deps", "messages"]:
        assert isinstance(inspect.getattr_static(RunContext, prop), property)


async def test_run_context_values_inside_a_tool() -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(note: str, here: RunContext[Any]) -> str:
        """Probe."""
        seen.update(
            turn=here.turn, session_id=here.session_id, run_id=here.run_id, budget=here.budget,
            workspace=here.workspace, system_prompt=here.system_prompt, agent=here.agent,
            entries=list(here.entries), messages=here.messages, usage=here.usage.copy(),
        )  # fmt: skip
        return note

    assert list(probe.parameters["properties"]) == ["note"]  # ctx excluded from schema, any name
    budget = RunBudget()
    session = InMemorySession()
    agent = mk(ScriptedProvider([call("probe", {"note": "n"}), text("x")]), probe)
    await Runner.run(agent, "hi", budget=budget, session=session, session_id="s1")
    assert seen["turn"] == 1
    assert seen["session_id"] == "s1"
    assert isinstance(seen["run_id"], str) and seen["run_id"]
    assert seen["budget"] is budget
    assert seen["workspace"] is None
    assert seen["system_prompt"] == "Be brief."
    assert seen["agent"] is agent
    assert [e.type for e in seen["entries"]] == ["input", "input", "tool_call"]  # live transcript incl. system head
    assert [m.role for m in seen["messages"]] == ["system", "user", "assistant"]
    assert seen["usage"].total_tokens > 0


async def test_ctx_turn_is_zero_before_first_turn() -> None:
    turns: list[int] = []
    hooks = AgentHooks()

    @hooks.on(events.RunStarted)
    def started(ev: Any, ctx: RunContext[Any]) -> None:
        turns.append(ctx.turn)

    await Runner.run(mk(ScriptedProvider([text("x")]), hooks=hooks), "hi")
    assert turns == [0]


def test_two_context_parameters_is_user_error() -> None:
    def bad(a: RunContext[Any], b: RunContext[Any]) -> str:
        """Bad."""
        return ""

    with pytest.raises(UserError):
        tool(bad)


# =========================================================================== 1.6 tools


def test_tool_dataclass_fields() -> None:
    assert dataclasses.is_dataclass(Tool)
    assert names(Tool)[:4] == ["name", "description", "parameters", "invoke"]
    d = defaults(Tool)
    assert d["strict"] is False
    assert d["needs_approval"] is False
    assert d["retries"] is None
    assert d["timeout"] is None
    assert d["parallel"] is True
    assert d["max_output_chars"] is None
    assert d["result_renderer"] is None
    assert tuple(d["policies"]) == ()


def test_tool_decorator_options_and_defaults() -> None:
    opts = kwonly(tool)
    assert {
        "name": None, "description": None, "strict": False, "needs_approval": False, "retries": None,
        "timeout": None, "parallel": True, "max_output_chars": None, "result_renderer": None, "policies": (),
    }.items() <= opts.items()  # fmt: skip


def test_tool_bare_and_called_forms_name_and_description() -> None:
    @tool
    def lookup(city: str, days: int = 3) -> str:
        """Look up the weather.

        More detail that is not the summary.
        """
        return city

    assert isinstance(lookup, Tool)
    assert lookup.name == "lookup"
    assert lookup.description.startswith("Look up the weather.")
    assert lookup.parameters["type"] == "object"
    assert lookup.parameters["required"] == ["city"]  # default => optional
    assert lookup.parameters["properties"]["days"]["type"] == "integer"

    @tool(name="renamed", description="custom")
    def other(x: Annotated[str, "the x value"]) -> str:
        return x

    assert other.name == "renamed" and other.description == "custom"
    assert other.parameters["properties"]["x"]["description"] == "the x value"


class Point(pydantic.BaseModel):
    x: int
    y: int


@dataclass
class Box:
    w: float


class Opts(TypedDict):
    flag: bool


def test_tool_schema_accepts_annotated_field_models_literals_unions() -> None:
    @tool
    def shapes(
        p: Point,
        b: Box,
        o: Opts,
        mode: Literal["a", "b"],
        n: int | str,
        k: Annotated[int, pydantic.Field(ge=0, description="count")] = 0,
    ) -> str:
        """Shapes."""
        return "ok"

    props = shapes.parameters["properties"]
    assert set(props) == {"p", "b", "o", "mode", "n", "k"}
    assert props["k"]["description"] == "count"


def test_strict_tool_schema() -> None:
    @tool(strict=True)
    def s(a: int, b: str = "x") -> str:
        """S."""
        return b

    assert s.strict is True
    assert s.parameters["additionalProperties"] is False
    assert sorted(s.parameters["required"]) == ["a", "b"]

    def unannotated(a):  # type: ignore[no-untyped-def]
        """U."""
        return a

    with pytest.raises(UserError):
        tool(strict=True)(unannotated)


async def test_sync_tools_run_on_a_worker_thread_async_awaited() -> None:
    import threading

    threads: dict[str, Any] = {}

    @tool
    def sync_tool() -> str:
        """Sync."""
        threads["sync"] = threading.current_thread()
        return "s"

    @tool
    async def async_tool() -> str:
        """Async."""
        threads["async"] = threading.current_thread()
        return "a"

    await Runner.run(
        mk(ScriptedProvider([batch(("sync_tool", {}), ("async_tool", {})), text("x")]), sync_tool, async_tool), "hi"
    )
    assert threads["sync"] is not threading.main_thread()
    assert threads["async"] is threading.main_thread()


async def test_invalid_arguments_become_error_result_and_are_never_retried() -> None:
    attempts = []

    @tool(retries=3)
    def typed(n: int) -> int:
        """Typed."""
        attempts.append(n)
        return n

    handle = Runner.stream(mk(ScriptedProvider([call("typed", {"n": "not a number"}), text("x")]), typed), "hi")
    evs = await collect(handle)
    result = await handle
    assert attempts == []
    res = result.entries[2]
    assert isinstance(res, ToolResultEntry) and res.is_error
    failed = [e for e in evs if isinstance(e, events.ToolCallFailed)]
    assert failed and isinstance(failed[0].error, InvalidToolArguments)


async def test_coercion_happens_before_the_function() -> None:
    got: list[Any] = []

    @tool
    def typed(n: int) -> int:
        """Typed."""
        got.append(n)
        return n

    await Runner.run(mk(ScriptedProvider([call("typed", {"n": "5"}), text("x")]), typed), "hi")
    assert got == [5]


async def test_tool_exceptions_become_results_and_tool_error_hint_shapes_them() -> None:
    @tool
    def broken() -> str:
        """Broken."""
        raise RuntimeError("kaput")

    @tool
    def shaped() -> str:
        """Shaped."""
        raise ToolError("no such order", hint="list orders first")

    provider = ScriptedProvider([batch(("broken", {}), ("shaped", {})), text("recovered")])
    result = await Runner.run(mk(provider, broken, shaped), "hi")
    assert result.output == "recovered"
    outputs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    broken_out = outputs["call_broken_0"]
    shaped_out = outputs["call_shaped_1"]
    assert broken_out.is_error and broken_out.output.startswith("Tool error: ") and "kaput" in broken_out.output
    assert shaped_out.is_error and shaped_out.output.startswith("Tool error: ")
    assert "no such order" in shaped_out.output and "list orders first" in shaped_out.output


async def test_run_cancelled_raised_in_tool_ends_the_run() -> None:
    @tool
    def stopper() -> str:
        """Stop."""
        raise RunCancelled("halt")

    with pytest.raises(RunCancelled):
        await Runner.run(mk(ScriptedProvider([call("stopper"), text("never")]), stopper), "hi")


async def test_own_budget_exceeded_in_tool_ends_run_but_sub_run_overrun_is_error_result() -> None:
    @tool
    def over() -> str:
        """Over."""
        raise BudgetExceeded("own budget")

    with pytest.raises(BudgetExceeded):
        await Runner.run(mk(ScriptedProvider([call("over"), text("never")]), over), "hi")

    child_provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), call("add", {"a": 1, "b": 1}), text("c")])
    child = Agent(name="child", model=child_provider, tools=[add])
    ask = child.as_tool(budget=RunBudget(max_tool_calls=1))
    result = await Runner.run(mk(ScriptedProvider([call(ask.name, {"input": "go"}), text("parent done")]), ask), "hi")
    assert result.output == "parent done"
    res = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert res.is_error


async def test_default_rendering_and_renderer_precedence() -> None:
    @tool
    def as_dict() -> dict[str, int]:
        """Dict."""
        return {"a": 1}

    @tool
    def as_str() -> str:
        """Str."""
        return "plain"

    @tool(result_renderer=lambda raw, ctx: f"tool:{raw}")
    def own() -> int:
        """Own."""
        return 1

    provider = ScriptedProvider([batch(("as_dict", {}), ("as_str", {})), text("x")])
    result = await Runner.run(mk(provider, as_dict, as_str), "hi")
    outs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert json.loads(outs["call_as_dict_0"].output) == {"a": 1}
    assert outs["call_as_dict_0"].raw == {"a": 1}
    assert outs["call_as_str_1"].output == "plain"

    provider = ScriptedProvider([batch(("own", {}), ("as_str", {})), text("x")])
    agent = mk(provider, own, as_str, tool_result_renderer=lambda raw, ctx: f"agent:{raw}")
    result = await Runner.run(agent, "hi")
    outs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outs["call_own_0"].output == "tool:1"
    assert outs["call_as_str_1"].output == "agent:plain"


async def test_output_cap_truncates_head_and_tail_and_drops_raw() -> None:
    @tool(max_output_chars=100)
    def big() -> str:
        """Big."""
        return "H" * 500 + "T" * 500

    result = await Runner.run(mk(ScriptedProvider([call("big"), text("x")]), big), "hi")
    res = result.entries[2]
    assert isinstance(res, ToolResultEntry)
    assert len(res.output) <= 100 and res.output.startswith("H") and res.output.endswith("T")
    assert res.raw is None

    @tool
    def big2() -> str:
        """Big2."""
        return "x" * 1000

    result = await Runner.run(mk(ScriptedProvider([call("big2"), text("x")]), big2, max_tool_output_chars=50), "hi")
    assert len(result.entries[2].output) <= 50  # type: ignore[union-attr]
    result = await Runner.run(mk(ScriptedProvider([call("big2"), text("x")]), big2, max_tool_output_chars=None), "hi")
    assert result.entries[2].output == "x" * 1000  # type: ignore[union-attr]


async def test_retries_and_agent_default_retries() -> None:
    attempts: list[int] = []

    @tool(retries=2)
    def flaky() -> str:
        """Flaky."""
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("again")
        return "finally"

    result = await Runner.run(mk(ScriptedProvider([call("flaky"), text("x")]), flaky), "hi")
    assert len(attempts) == 3 and result.entries[2].output == "finally"  # type: ignore[union-attr]

    tries: list[int] = []

    @tool
    def once() -> str:
        """Once."""
        tries.append(1)
        raise RuntimeError("no")

    await Runner.run(mk(ScriptedProvider([call("once"), text("x")]), once), "hi")
    assert len(tries) == 1  # agent default 0 retries


async def test_timeout_per_attempt() -> None:
    @tool(timeout=0.05)
    async def sleepy() -> str:
        """Sleepy."""
        await asyncio.sleep(2)
        return "late"

    result = await Runner.run(mk(ScriptedProvider([call("sleepy"), text("x")]), sleepy), "hi")
    assert result.entries[2].is_error  # type: ignore[union-attr]

    @tool
    async def sleepy2() -> str:
        """Sleepy."""
        await asyncio.sleep(2)
        return "late"

    result = await Runner.run(
        mk(ScriptedProvider([call("sleepy2"), text("x")]), sleepy2, default_tool_timeout=0.05), "hi"
    )
    assert result.entries[2].is_error  # type: ignore[union-attr]


async def test_parallel_false_is_a_barrier() -> None:
    log: list[str] = []

    @tool
    async def fast(tag: str) -> str:
        """Fast."""
        log.append(f"start {tag}")
        await asyncio.sleep(0.02)
        log.append(f"end {tag}")
        return tag

    @tool(parallel=False)
    async def alone() -> str:
        """Alone."""
        log.append("start alone")
        await asyncio.sleep(0.01)
        log.append("end alone")
        return "alone"

    turn = batch(("fast", {"tag": "a"}), ("fast", {"tag": "b"}), ("alone", {}), ("fast", {"tag": "c"}))
    await Runner.run(mk(ScriptedProvider([turn, text("x")]), fast, alone), "hi")
    assert log[:2] == ["start a", "start b"]  # parallel calls overlap
    i = log.index("start alone")
    assert {"end a", "end b"} <= set(log[:i])
    assert log[i + 1] == "end alone"
    assert log[-2:] == ["start c", "end c"]


async def test_policies_first_is_outermost_and_retries_wrap_the_chain() -> None:
    log: list[str] = []

    def make(tag: str) -> Any:
        async def policy(invoke: Any, args: dict[str, Any], ctx: Any) -> Any:
            log.append(f"{tag}>")
            out = await invoke(args, ctx)
            log.append(f"<{tag}")
            return out

        return policy

    @tool(policies=[make("outer"), make("inner")])
    def t(x: int) -> int:
        """T."""
        log.append("fn")
        return x

    await Runner.run(mk(ScriptedProvider([call("t", {"x": 1}), text("x")]), t), "hi")
    assert log == ["outer>", "inner>", "fn", "<inner", "<outer"]


async def test_tool_name_conflicts_are_user_errors_at_run_start() -> None:
    class Plug:
        name = "plug"

        async def setup(self) -> PluginInstance:
            return PluginInstance(tools=[add])

    provider = ScriptedProvider([text("x")])
    with pytest.raises(UserError):
        await Runner.run(mk(provider, add, plugins=[Plug()]), "hi")
    assert provider.calls == []


# =========================================================================== 1.7 ModelSettings


def test_model_settings_fields_and_defaults() -> None:
    assert names(ModelSettings)[:6] == [
        "temperature",
        "top_p",
        "max_tokens",
        "stop",
        "parallel_tool_calls",
        "provider_options",
    ]
    s = ModelSettings()
    assert (s.temperature, s.top_p, s.max_tokens, s.stop, s.parallel_tool_calls) == (None,) * 5
    assert s.provider_options == {}


async def test_agent_settings_reach_the_provider() -> None:
    provider = ScriptedProvider([text("x")])
    settings = ModelSettings(temperature=0.1, max_tokens=5)
    await Runner.run(mk(provider, settings=settings), "hi")
    assert provider.requests[0].settings == settings


# =========================================================================== 1.8 events

FAMILIES = [
    "RunEvent",
    "TurnEvent",
    "DeltaEvent",
    "MessageEvent",
    "ToolEvent",
    "TransitionEvent",
    "ErrorEvent",
    "ContextEvent",
]

EVENT_TABLE = {
    "RunStarted": ("RunEvent", ["agent"]),
    "TurnStarted": ("TurnEvent", ["agent", "turn"]),
    "TurnEnded": ("TurnEvent", ["agent", "turn"]),
    "TextDelta": ("DeltaEvent", ["delta"]),
    "ReasoningDelta": ("DeltaEvent", ["delta"]),
    "OutputDiscarded": ("DeltaEvent", []),
    "MessageCompleted": ("MessageEvent", ["entries"]),
    "UserMessageInjected": ("MessageEvent", ["content", "turn"]),
    "ToolCallStarted": ("ToolEvent", ["call"]),
    "ToolCallCompleted": ("ToolEvent", ["call", "result", "is_error", "output"]),
    "ApprovalRequired": ("ToolEvent", ["call"]),
    "ToolCallFailed": ("ErrorEvent", ["error", "call"]),
    "HandoffOccurred": ("TransitionEvent", ["from_agent", "to_agent"]),
    "ContextCompacted": ("ContextEvent", ["session_id", "entries_before", "entries_after", "notice"]),
    "RunCompleted": ("RunEvent", ["result"]),
    "RunFailed": ("RunEvent", ["error"]),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_event_families_derive_from_event(family: str) -> None:
    assert issubclass(getattr(events, family), events.Event)


@pytest.mark.parametrize("name", sorted(EVENT_TABLE))
def test_event_class_family_and_fields(name: str) -> None:
    family, fields = EVENT_TABLE[name]
    cls = getattr(events, name)
    assert dataclasses.is_dataclass(cls)
    assert issubclass(cls, getattr(events, family))
    public = [n for n in names(cls) if not n.startswith("_")]
    assert public == fields


def test_event_field_defaults() -> None:
    call_ = ToolCall("c1", "t", "{}")
    done = events.ToolCallCompleted(call=call_, result=1, output="1")
    assert done.is_error is False
    failed = events.ToolCallFailed(error=RuntimeError("x"))
    assert failed.call is None
    approval = events.ApprovalRequired(call=call_)
    assert callable(approval.approve) and callable(approval.reject)


def test_compaction_notice() -> None:
    notice = events.CompactionNotice(reason="threshold", reactive=False)
    assert names(events.CompactionNotice) == [
        "reason",
        "reactive",
        "summary",
        "tokens_before",
        "tokens_after",
        "detail",
    ]
    assert (notice.summary, notice.tokens_before, notice.tokens_after, notice.detail) == (None, None, None, [])
    json.dumps(dataclasses.asdict(notice))


def test_tool_call_lives_in_messages() -> None:
    assert names(ToolCall) == ["id", "name", "arguments"]
    c = ToolCall("id1", "n", '{"a": 1}')
    assert (c.id, c.name, c.arguments) == ("id1", "n", '{"a": 1}')


def test_text_delta_naming_trap() -> None:
    import lovia.transcript as tr

    assert events.TextDelta is not tr.TextDelta
    assert events.ReasoningDelta is not tr.ReasoningDelta
    assert names(events.TextDelta) == ["delta"] and names(events.ReasoningDelta) == ["delta"]
    assert names(tr.TextDelta) == ["text", "type"] and names(tr.ReasoningDelta) == ["text", "type"]


async def test_event_order_of_a_tool_turn() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3", reasoning="hm")])
    evs = await collect(Runner.stream(mk(provider, add), "hi"))
    assert kinds(evs) == [
        "RunStarted",
        "TurnStarted", "MessageCompleted", "ToolCallStarted", "ToolCallCompleted", "TurnEnded",
        "TurnStarted", "ReasoningDelta", "ReasoningDelta", "TextDelta", "MessageCompleted", "TurnEnded",
        "RunCompleted",
    ]  # fmt: skip
    assert [e.turn for e in evs if isinstance(e, (events.TurnStarted, events.TurnEnded))] == [1, 1, 2, 2]
    done = next(e for e in evs if isinstance(e, events.ToolCallCompleted))
    assert done.result == 3 and done.output == "3" and done.is_error is False
    assert done.call == ToolCall("call_add", "add", '{"a": 1, "b": 2}')
    msg = [e for e in evs if isinstance(e, events.MessageCompleted)]
    assert [e.type for e in msg[1].entries] == ["reasoning", "assistant_text"]


async def test_tool_call_completed_in_completion_order() -> None:
    @tool
    async def wait(ms: int) -> int:
        """Wait."""
        await asyncio.sleep(ms / 1000)
        return ms

    turn = batch(("wait", {"ms": 60}), ("wait", {"ms": 5}))
    handle = Runner.stream(mk(ScriptedProvider([turn, text("x")]), wait), "hi")
    evs = await collect(handle)
    done = [e.result for e in evs if isinstance(e, events.ToolCallCompleted)]
    assert done == [5, 60]
    result = await handle
    assert [e.raw for e in result.entries if isinstance(e, ToolResultEntry)] == [5, 60]


@pytest.mark.parametrize("case", ["unknown", "bad_args", "denied"])
async def test_pre_execution_rejections_complete_without_start(case: str) -> None:
    @tool(needs_approval=True)
    def gated(n: int) -> int:
        """Gated."""
        return n

    turn = {
        "unknown": call("nope", {}),
        "bad_args": call("gated", {"n": "x"}),
        "denied": call("gated", {"n": 1}),
    }[case]
    evs = await collect(Runner.stream(mk(ScriptedProvider([turn, text("x")]), gated), "hi"))
    assert not any(isinstance(e, events.ToolCallStarted) for e in evs)
    done = [e for e in evs if isinstance(e, events.ToolCallCompleted)]
    assert len(done) == 1 and done[0].is_error is True


async def test_malformed_arguments_are_normalized_in_the_transcript() -> None:
    result = await Runner.run(mk(ScriptedProvider([call("add", "{not json"), text("x")]), add), "hi")
    entry = result.entries[1]
    assert isinstance(entry, ToolCallEntry)
    assert json.loads(entry.arguments) == {"_raw": "{not json"}
    assert result.entries[2].is_error  # type: ignore[union-attr]


# =========================================================================== 1.9 exceptions

TREE = {
    UserError: LoviaError,
    ProviderError: LoviaError,
    ContextOverflowError: LoviaError,
    ToolError: LoviaError,
    InvalidToolArguments: ToolError,
    OutputValidationError: LoviaError,
    MaxTurnsExceeded: LoviaError,
    BudgetExceeded: LoviaError,
    RunCancelled: LoviaError,
    GuardrailTripped: LoviaError,
    MCPError: LoviaError,
}


@pytest.mark.parametrize("cls", list(TREE), ids=lambda c: c.__name__)
def test_exception_tree(cls: type[Exception]) -> None:
    assert issubclass(cls, TREE[cls])
    assert issubclass(LoviaError, Exception)
    err = cls("msg") if cls is not GuardrailTripped else cls("why")
    assert err.hint is None


def test_context_overflow_is_not_a_provider_error() -> None:
    assert not issubclass(ContextOverflowError, ProviderError)
    assert ContextOverflowError("x", reported_window=8000).reported_window == 8000


def test_exception_attributes() -> None:
    e = ProviderError("x", vendor="openai", model="m", status_code=429, retryable=True, hint="wait")
    assert (e.vendor, e.model, e.status_code, e.retryable, e.hint) == ("openai", "m", 429, True, "wait")
    o = OutputValidationError("bad", raw="{", output_type_name="Out")
    assert (o.raw, o.output_type_name) == ("{", "Out")
    assert MCPError("x", tool_name="srv__t").tool_name == "srv__t"
    assert UserError("x", hint="do y").hint == "do y"
    assert ToolError("x", hint="h").hint == "h"
    top = [e.__name__ for e in lovia.exceptions.LoviaError.__subclasses__()]  # type: ignore[attr-defined]
    assert "ContextOverflowError" in top and "ProviderError" in top


# =========================================================================== 1.16 hooks


async def test_hooks_dispatch_rules() -> None:
    log: list[str] = []
    hooks = AgentHooks()

    @hooks.on(events.ToolEvent)  # family via isinstance
    def tool_family(ev: Any, ctx: RunContext[Any]) -> None:
        log.append(f"family:{type(ev).__name__}")

    @hooks.on((events.TurnStarted, events.TurnEnded))
    async def turns(ev: Any, ctx: RunContext[Any]) -> None:  # async handler
        log.append(f"tuple:{type(ev).__name__}")

    @hooks.on(events.ToolCallStarted)
    def boom(ev: Any, ctx: RunContext[Any]) -> None:
        raise RuntimeError("hook failure is ignored")

    @hooks.on_any
    def any_(ev: Any, ctx: RunContext[Any]) -> None:  # registered last, runs first
        log.append(f"any:{type(ev).__name__}")

    handle = Runner.stream(mk(ScriptedProvider([call("add", {"a": 1, "b": 1}), text("2")]), add, hooks=hooks), "hi")
    evs = await collect(handle)
    assert (await handle).output == "2"
    i = log.index("any:ToolCallStarted")
    assert log[i + 1] == "family:ToolCallStarted"
    assert log[log.index("any:TurnStarted") + 1] == "tuple:TurnStarted"
    assert "family:ToolCallCompleted" in log and "family:TurnStarted" not in log
    assert [x.split(":")[1] for x in log if x.startswith("any:")] == kinds(evs)


async def test_hooks_get_the_same_objects_as_the_stream() -> None:
    seen: list[Any] = []
    hooks = AgentHooks()
    hooks.on_any(lambda ev, ctx: seen.append(ev))
    evs = await collect(Runner.stream(mk(ScriptedProvider([text("ok")]), hooks=hooks), "hi"))
    assert len(seen) == len(evs) and all(a is b for a, b in zip(seen, evs, strict=True))


async def test_hooks_run_inline_before_the_stream_sees_the_event() -> None:
    log: list[str] = []
    hooks = AgentHooks()
    hooks.on_any(lambda ev, ctx: log.append(f"hook:{type(ev).__name__}"))
    async for ev in Runner.stream(mk(ScriptedProvider([text("ok")]), hooks=hooks), "hi"):
        log.append(f"stream:{type(ev).__name__}")
    for name in ["RunStarted", "TurnStarted", "RunCompleted"]:
        assert log.index(f"hook:{name}") < log.index(f"stream:{name}")


def test_tracing_and_logging_surface() -> None:
    from lovia.tracing import ConsoleTracer, InMemoryTracer, NoopTracer, RecordedSpan  # noqa: F401

    assert "min_duration_ms" in inspect.signature(ConsoleTracer).parameters
    params = inspect.signature(lovia.enable_logging).parameters
    assert list(params)[0] == "level"
    assert {k: params[k].default for k in ["stream", "color", "propagate"]} == {
        "stream": None,
        "color": None,
        "propagate": False,
    }


async def test_tracer_spans() -> None:
    from lovia.tracing import InMemoryTracer

    tracer = InMemoryTracer()
    await Runner.run(mk(ScriptedProvider([call("add", {"a": 1, "b": 1}), text("2")]), add), "hi", tracer=tracer)
    span_names = [s.name for s in tracer.spans]
    assert {"run", "model_call", "tool_call"} <= set(span_names)


# =========================================================================== 1.17 approvals


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return f"paid {amount}"


def _approval_run(handler: Any = None, tools: tuple[Tool[Any], ...] = (pay,)) -> tuple[ScriptedProvider, Agent[Any]]:
    provider = ScriptedProvider([call(tools[0].name, {"amount": 5}), text("done")])
    return provider, mk(provider, *tools, approval_handler=handler)


def _result_of(result: RunResult[Any]) -> ToolResultEntry:
    return next(e for e in result.entries if isinstance(e, ToolResultEntry))


async def test_plain_run_without_handler_denies() -> None:
    _, agent = _approval_run()
    res = _result_of(await asyncio.wait_for(Runner.run(agent, "pay"), 5))
    assert res.is_error


@pytest.mark.parametrize("decision,allowed", [(True, True), ("allow", True), (False, False), ("deny", False)])
async def test_approval_handler_decisions(decision: Any, allowed: bool) -> None:
    seen: list[Any] = []

    def handler(call_: ToolCall, ctx: RunContext[Any]) -> Any:
        seen.append(call_)
        return decision

    _, agent = _approval_run(handler)
    res = _result_of(await asyncio.wait_for(Runner.run(agent, "pay"), 5))
    assert res.is_error is (not allowed)
    assert isinstance(seen[0], ToolCall) and seen[0].name == "pay"


async def test_async_handler_and_handler_exception_denies() -> None:
    async def yes(call_: ToolCall, ctx: RunContext[Any]) -> bool:
        return True

    _, agent = _approval_run(yes)
    assert not _result_of(await Runner.run(agent, "pay")).is_error

    def broken(call_: ToolCall, ctx: RunContext[Any]) -> bool:
        raise RuntimeError("handler bug")

    _, agent = _approval_run(broken)
    assert _result_of(await asyncio.wait_for(Runner.run(agent, "pay"), 5)).is_error


async def test_handler_ask_with_nobody_to_ask_denies() -> None:
    _, agent = _approval_run(lambda c, ctx: "ask")
    res = _result_of(await asyncio.wait_for(Runner.run(agent, "pay"), 5))
    assert res.is_error


async def test_predicate_gating_and_predicate_exception_denies() -> None:
    @tool(needs_approval=lambda args, ctx: args["amount"] > 10)
    def spend(amount: int) -> str:
        """Spend."""
        return "spent"

    provider = ScriptedProvider([batch(("spend", {"amount": 5}), ("spend", {"amount": 50})), text("x")])
    result = await asyncio.wait_for(Runner.run(mk(provider, spend), "go"), 5)
    errs = [e.is_error for e in result.entries if isinstance(e, ToolResultEntry)]
    assert sorted(errs) == [False, True]

    def bad_pred(args: dict[str, Any], ctx: Any) -> bool:
        raise RuntimeError("pred bug")

    @tool(needs_approval=bad_pred)
    def spend2(amount: int) -> str:
        """Spend."""
        return "spent"

    result = await asyncio.wait_for(
        Runner.run(
            mk(
                ScriptedProvider([call("spend2", {"amount": 1}), text("x")]),
                spend2,
                approval_handler=lambda c, ctx: True,
            ),
            "go",
        ),
        5,
    )
    assert _result_of(result).is_error


async def test_stream_consumer_decides_first() -> None:
    handler_calls: list[Any] = []
    _, agent = _approval_run(lambda c, ctx: handler_calls.append(c) or False)
    handle = Runner.stream(agent, "pay")
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            ev.approve()
    res = _result_of(await handle)
    assert not res.is_error and res.output == "paid 5"
    assert handler_calls == []  # the consumer's decision came first


async def test_decision_later_through_handle_approvals() -> None:
    _, agent = _approval_run()
    handle = Runner.stream(agent, "pay")
    channel = handle.approvals
    pending: list[str] = []
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            pending.append(ev.call.id)
            asyncio.get_running_loop().call_later(0.01, channel.approve, ev.call.id)
    assert pending == ["call_pay"]
    assert not _result_of(await handle).is_error


def test_approval_channel_surface() -> None:
    from lovia.approvals import ApprovalChannel

    ch = ApprovalChannel()
    for m in ["approve", "reject", "is_pending", "resolve", "release", "discard"]:
        assert callable(getattr(ch, m)), m
    assert inspect.signature(ch.release).parameters["decision"].default is False


async def test_rejected_stream_approval() -> None:
    _, agent = _approval_run()
    handle = Runner.stream(agent, "pay")
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            ev.reject()
    assert _result_of(await handle).is_error


# =========================================================================== 1.18 budgets, cancel, mailbox


def test_run_budget_positional_order_and_defaults() -> None:
    b = RunBudget(1, 2, 3, 4, 5.0)
    assert (b.max_input_tokens, b.max_output_tokens, b.max_total_tokens, b.max_tool_calls, b.max_seconds) == (
        1,
        2,
        3,
        4,
        5.0,
    )
    d = RunBudget()
    assert (d.max_input_tokens, d.max_output_tokens, d.max_total_tokens, d.max_tool_calls, d.max_seconds) == (None,) * 5


async def test_budget_total_tokens_checked_after_model_reply() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), text("never")])
    calls_made: list[int] = []

    @tool
    def add2(a: int, b: int) -> int:
        """Add."""
        calls_made.append(1)
        return a + b

    provider = ScriptedProvider([call("add2", {"a": 1, "b": 1}), text("never")])
    with pytest.raises(BudgetExceeded):
        await Runner.run(mk(provider, add2), "hi", budget=RunBudget(max_total_tokens=1))
    assert calls_made == []  # checked after the reply, before tools


async def test_budget_counts_rejected_tool_calls_and_lets_in_flight_finish() -> None:
    done: list[str] = []

    @tool
    async def work(tag: str) -> str:
        """Work."""
        await asyncio.sleep(0.02)
        done.append(tag)
        return tag

    turn = batch(("missing", {}), ("work", {"tag": "a"}), ("work", {"tag": "b"}))
    checkpointer = InMemoryCheckpointer()
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            mk(ScriptedProvider([turn, text("x")]), work),
            "hi",
            budget=RunBudget(max_tool_calls=2),
            checkpoint=CheckpointOptions(checkpointer, "b1"),
        )
    assert done == ["a"]  # the rejected call counted; the in-flight one finished
    snap = await checkpointer.load("b1")
    assert snap is not None and snap.status == "interrupted"
    assert [e.type for e in snap.entries].count("tool_result") == 2  # rejected + finished, persisted


def test_cancel_token_surface() -> None:
    t = CancelToken()
    assert t.is_cancelled is False
    t.check()
    t.cancel("why")
    assert t.is_cancelled is True
    with pytest.raises(RunCancelled):
        t.check()


async def test_cancel_token_checked_between_turns() -> None:
    token = CancelToken()

    @tool
    def trip() -> str:
        """Trip."""
        token.cancel("enough")
        return "tripped"

    provider = ScriptedProvider([call("trip"), text("never")])
    with pytest.raises(RunCancelled):
        await Runner.run(mk(provider, trip), "hi", cancel_token=token)
    assert len(provider.calls) == 1


def test_mailbox_surface() -> None:
    box = Mailbox()
    assert not box
    t1 = box.push("one")
    t2 = box.push([TextPart("two")])
    assert isinstance(t1, int) and t1 != t2 and box
    assert box.remove(t1) is True and box.remove(t1) is False
    assert box.drain() == [[TextPart("two")]]
    assert not box


async def test_mailbox_drained_after_turn_started_hooks() -> None:
    hooks = AgentHooks()

    @hooks.on(events.TurnStarted)
    def steer(ev: events.TurnStarted, ctx: RunContext[Any]) -> None:
        if ev.turn == 1:
            ctx.mailbox.push("steer now")

    provider = ScriptedProvider([text("ok")])
    handle = Runner.stream(mk(provider, hooks=hooks), "hi")
    evs = await collect(handle)
    result = await handle
    assert [m.text for m in provider.calls[0]] == ["Be brief.", "hi", "steer now"]  # landed in the same turn
    assert kinds(evs)[:3] == ["RunStarted", "TurnStarted", "UserMessageInjected"]
    injected = evs[2]
    assert isinstance(injected, events.UserMessageInjected) and injected.content == "steer now" and injected.turn == 1
    assert result.entries[:2] == [InputEntry("user", "hi"), InputEntry("user", "steer now")]


async def test_caller_mailbox_keeps_undrained_items() -> None:
    box = Mailbox()
    box.push("early")
    hooks = AgentHooks()

    @hooks.on(events.RunCompleted)
    def late(ev: Any, ctx: RunContext[Any]) -> None:
        ctx.mailbox.push("for later")

    await Runner.run(mk(ScriptedProvider([text("ok")]), hooks=hooks), "hi", mailbox=box)
    assert box.drain() == ["for later"]


# =========================================================================== 1.19 structured output


class Verdict(pydantic.BaseModel):
    label: str
    score: int


async def test_structured_output_prompt_fallback_and_lenient_parse() -> None:
    provider = ScriptedProvider([text('Sure! Here it is:\n```json\n{"label": "ok", "score": 3}\n```')])
    result = await Runner.run(mk(provider, output_type=Verdict), "judge")
    assert result.output == Verdict(label="ok", score=3)
    assert provider.supports_json_schema is False
    assert "output format" in provider.calls[0][0].text.lower()
    offered = [t.name for t in provider.requests[0].tools]
    assert offered in ([], ["recall_tool_result"])  # never a synthetic output tool
    assert provider.requests[0].response_format is None

    provider = ScriptedProvider([text('The answer is {"label": "x", "score": 1} as requested.')])
    assert (await Runner.run(mk(provider, output_type=Verdict), "judge")).output == Verdict(label="x", score=1)


async def test_structured_output_types() -> None:
    @dataclass
    class Pair:
        a: int
        b: str

    cases: list[tuple[Any, str, Any]] = [
        (list[int], "[1, 2]", [1, 2]),
        (Literal["yes", "no"], "yes", "yes"),
        (int, "7", 7),
        (int | None, "null", None),
    ]
    for out_type, raw, expected in cases:
        result = await Runner.run(mk(ScriptedProvider([text(raw)])), "q", output_type=out_type)
        assert result.output == expected, out_type


async def test_repair_true_one_corrective_turn_then_raise() -> None:
    provider = ScriptedProvider([text("not json"), text('{"label": "ok", "score": 1}')])
    result = await Runner.run(mk(provider, output_type=Verdict), "judge")
    assert result.output.score == 1 and result.turns == 2
    repair = provider.calls[1][-1]
    assert repair.role == "user"
    assert [e.type for e in result.entries] == ["input", "assistant_text", "input", "assistant_text"]

    provider = ScriptedProvider([text("nope"), text("still nope")])
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(mk(provider, output_type=Verdict), "judge")
    assert info.value.raw == "still nope"
    assert len(provider.calls) == 2


async def test_repair_false_fails_fast_and_empty_reply_goes_through_repair() -> None:
    provider = ScriptedProvider([text("nope"), text("{}")])
    with pytest.raises(OutputValidationError):
        await Runner.run(mk(provider, output_type=Verdict, output_repair=False), "judge")
    assert len(provider.calls) == 1

    provider = ScriptedProvider([text(""), text('{"label": "a", "score": 2}')])
    result = await Runner.run(mk(provider, output_type=Verdict), "judge")
    assert result.output.label == "a" and result.turns == 2


async def test_custom_repair_strategy() -> None:
    attempts: list[int] = []

    class Strategy:
        def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
            attempts.append(attempt)
            return None if attempt > 2 else f"try again #{attempt}"

    provider = ScriptedProvider([text("a"), text("b"), text("c")])
    with pytest.raises(OutputValidationError):
        await Runner.run(mk(provider, output_type=Verdict, output_repair=Strategy()), "judge")
    assert attempts == [1, 2, 3]
    assert provider.calls[1][-1].text == "try again #1" and provider.calls[2][-1].text == "try again #2"


async def test_repairs_count_against_max_turns() -> None:
    provider = ScriptedProvider([text("bad"), text("bad")])
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(mk(provider, output_type=Verdict), "judge", max_turns=1)


# =========================================================================== 1.20 RetryPolicy


def test_retry_policy_defaults_and_delay() -> None:
    p = RetryPolicy()
    assert (p.max_attempts, p.restart_on_partial, p.backoff_base, p.backoff_max) == (5, True, 1.0, 30.0)
    assert p.sleep is asyncio.sleep
    assert p.retry_on(ProviderError("x", retryable=True)) and not p.retry_on(ProviderError("x", retryable=False))
    assert names(RetryPolicy)[:6] == [
        "max_attempts",
        "restart_on_partial",
        "backoff_base",
        "backoff_max",
        "retry_on",
        "sleep",
    ]
    if hasattr(p, "delay"):
        for n in range(1, 8):
            d = p.delay(n)
            base = min(30.0, 2.0 ** (n - 1))
            assert 0.5 * base <= d <= 1.5 * base


async def test_retry_on_retryable_error_without_adding_turns() -> None:
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    provider = ScriptedProvider(
        [fail(ProviderError("503", retryable=True)), fail(ProviderError("429", retryable=True)), text("ok")]
    )
    result = await Runner.run(mk(provider, retry=RetryPolicy(sleep=sleep)), "hi")
    assert result.output == "ok" and result.turns == 1 and len(waits) == 2


async def test_partial_stream_restart_emits_output_discarded() -> None:
    full = text("hello")
    provider = ScriptedProvider([fail(ProviderError("cut", retryable=True), after=full, after_deltas=2), text("hello")])
    handle = Runner.stream(mk(provider, retry=NO_WAIT), "hi")
    evs = await collect(handle)
    result = await handle
    k = kinds(evs)
    assert "OutputDiscarded" in k
    i = k.index("OutputDiscarded")
    assert k[i - 2 : i] == ["TextDelta", "TextDelta"]
    assert result.entries[-1] == AssistantTextEntry("hello")
    assert result.turns == 1


async def test_retry_disabled() -> None:
    provider = ScriptedProvider([fail(ProviderError("503", retryable=True)), text("ok")])
    with pytest.raises(ProviderError):
        await Runner.run(mk(provider, retry=None), "hi")
    provider = ScriptedProvider([fail(ProviderError("503", retryable=True)), text("ok")])
    with pytest.raises(ProviderError):
        await Runner.run(mk(provider), "hi", retry=RetryPolicy(max_attempts=1))
    provider = ScriptedProvider([fail(ProviderError("400", retryable=False)), text("ok")])
    with pytest.raises(ProviderError):
        await Runner.run(mk(provider, retry=NO_WAIT), "hi")


async def test_context_overflow_is_not_retried() -> None:
    from lovia.context import NoopContextPolicy

    provider = ScriptedProvider([fail(ContextOverflowError("too long")), text("ok")])
    with pytest.raises(ContextOverflowError):
        await Runner.run(mk(provider, retry=NO_WAIT, context_policy=NoopContextPolicy()), "hi")
    assert len(provider.calls) == 1


# =========================================================================== 1.21 testing helpers


async def test_scripted_provider_contract() -> None:
    provider = ScriptedProvider([text("a")])
    assert provider.supports_json_schema is False
    await Runner.run(mk(provider), "hi")
    assert isinstance(provider.calls, list) and isinstance(provider.calls[0], list)
    assert all(isinstance(m, Message) for m in provider.calls[0])
    with pytest.raises(AssertionError, match="^ScriptedProvider ran out of canned responses$"):
        await Runner.run(mk(provider), "again")


async def test_scripted_builders() -> None:
    evs = await collect(Runner.stream(mk(ScriptedProvider([text("abc", reasoning="xy")])), "hi"))
    deltas = [e for e in evs if isinstance(e, (events.TextDelta, events.ReasoningDelta))]
    assert [(type(d).__name__, d.delta) for d in deltas] == [
        ("ReasoningDelta", "x"), ("ReasoningDelta", "y"), ("TextDelta", "a"), ("TextDelta", "b"), ("TextDelta", "c"),
    ]  # fmt: skip
    assert "reasoning" in kwonly(text) and "call_id" in kwonly(call)

    result = await Runner.run(mk(ScriptedProvider([call("add", {"a": 1, "b": 2}, call_id="X"), text("ok")]), add), "hi")
    assert result.entries[1] == ToolCallEntry("X", "add", '{"a": 1, "b": 2}')
    result = await Runner.run(mk(ScriptedProvider([call("add", {"a": 1, "b": 2}), text("ok")]), add), "hi")
    assert result.entries[1].call_id == "call_add"  # type: ignore[union-attr]
    result = await Runner.run(
        mk(ScriptedProvider([batch(("add", {"a": 1, "b": 2}), ("echo", {"text": "t"})), text("ok")]), add, echo), "hi"
    )
    calls_ = [e for e in result.entries if isinstance(e, ToolCallEntry)]
    assert [c.name for c in calls_] == ["add", "echo"] and len({c.call_id for c in calls_}) == 2
    assert result.turns == 2


async def test_handler_ask_defers_to_the_out_of_band_channel() -> None:
    _, agent = _approval_run(lambda c, ctx: "ask")
    handle = Runner.stream(agent, "pay")
    channel = handle.approvals
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            asyncio.get_running_loop().call_later(0.01, channel.approve, ev.call.id)
    assert not _result_of(await handle).is_error


# =========================================================================== 1.23 messages and parts


def test_message_fields_and_text() -> None:
    assert names(Message) == ["role", "content", "reasoning", "tool_calls", "tool_call_id", "name"]
    m = Message("assistant")
    assert (m.content, m.reasoning, m.tool_calls, m.tool_call_id, m.name) == (None, None, [], None, None)
    assert m.text == ""
    assert Message("user", [TextPart("a"), ImagePart(url="http://x/i.png"), TextPart("b")]).text == "ab"


def test_message_builders() -> None:
    assert system("s") == Message("system", "s")
    assert assistant("a") == Message("assistant", "a")
    assert user("u") == Message("user", "u")
    assert user(TextPart("t")).content == [TextPart("t")]
    assert user([TextPart("t"), ImagePart(url="http://x")]).role == "user"
    with pytest.raises((TypeError, ValueError, UserError)):
        user(["plain string in a list"])  # type: ignore[list-item]


def test_usage() -> None:
    assert names(Usage) == ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
    u = Usage()
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (0, 0, 0, 0)
    u = Usage(100, 20, 80, 10)
    assert u.total_tokens == 120  # cache fields are a breakdown of input, not additive
    assert isinstance(inspect.getattr_static(Usage, "total_tokens"), property)


def test_parts(tmp_path: Any) -> None:
    assert names(TextPart)[0] == "text"
    img = ImagePart(url="https://example.com/a.png")
    assert img.detail is None and img.url == "https://example.com/a.png"
    for detail in ("low", "high", "auto"):
        ImagePart(data="aGk=", mime_type="image/png", detail=detail)  # type: ignore[arg-type]
    path = tmp_path / "pic.png"
    path.write_bytes(b"\x89PNG fake")
    from_path = ImagePart.from_path(path)
    assert from_path.data and from_path.mime_type == "image/png"
    doc = tmp_path / "doc.pdf"
    doc.write_bytes(b"%PDF-1.4")
    f = FilePart.from_path(doc)
    assert f.filename == "doc.pdf" and f.mime_type == "application/pdf" and f.data
    assert FilePart.from_bytes(b"hi", mime_type="text/plain").data == "aGk="
    assert FilePart.from_base64("aGk=", mime_type="text/plain").data == "aGk="
    assert FilePart.from_url("https://example.com/x.pdf").url == "https://example.com/x.pdf"
    assert "filename" in names(FilePart) and "mime_type" in names(FilePart)


# =========================================================================== 2. transcript entries


ENTRY_TABLE = [
    (InputEntry, "input", ["role", "content"], {}),
    (AssistantTextEntry, "assistant_text", ["content", "id"], {"id": None}),
    (
        ReasoningEntry,
        "reasoning",
        ["content", "id", "provider", "metadata"],
        {"id": None, "provider": None, "metadata": {}},
    ),
    (ToolCallEntry, "tool_call", ["call_id", "name", "arguments"], {}),
    (
        ToolResultEntry,
        "tool_result",
        ["call_id", "output", "raw", "is_error", "parts"],
        {"raw": None, "is_error": False, "parts": None},
    ),
]


@pytest.mark.parametrize("cls,tag,fields,defs", ENTRY_TABLE, ids=lambda x: getattr(x, "__name__", None))
def test_entry_fields_type_last(cls: type, tag: str, fields: list[str], defs: dict[str, Any]) -> None:
    assert names(cls) == [*fields, "type"]
    d = defaults(cls)
    assert d["type"] == tag
    for k, v in defs.items():
        assert d[k] == v, k


def test_transcript_entry_union() -> None:
    import typing

    from lovia.transcript import TranscriptEntry

    assert set(typing.get_args(TranscriptEntry)) == {
        InputEntry,
        AssistantTextEntry,
        ReasoningEntry,
        ToolCallEntry,
        ToolResultEntry,
    }


def test_entry_to_dict_plain_kinds_and_round_trip() -> None:
    samples = [
        InputEntry("user", "hi"),
        InputEntry("system", "sys"),
        AssistantTextEntry("yo", id="msg_1"),
        ReasoningEntry("think", id="r1", provider="anthropic", metadata={"signature": "abc"}),
        ToolCallEntry("c1", "add", '{"a": 1}'),
        ToolResultEntry("c1", "2", raw=2, is_error=False),
    ]
    for e in samples:
        d = entry_to_dict(e)
        assert d["type"] == e.type
        json.dumps(d)
        assert entry_from_dict(d) == e
    assert entry_to_dict(ToolCallEntry("c1", "add", "{}")) == {
        "type": "tool_call",
        "call_id": "c1",
        "name": "add",
        "arguments": "{}",
    }
    assert entry_to_dict(AssistantTextEntry("x")) == {"type": "assistant_text", "content": "x", "id": None}


def test_input_entry_parts_serialization() -> None:
    e = InputEntry(
        "user",
        [
            TextPart("look"),
            ImagePart(data="aGk=", mime_type="image/png", detail="low"),
            FilePart(url="https://x/f.pdf", filename="f.pdf"),
        ],
    )
    d = entry_to_dict(e)
    assert d["content"][0] == {"type": "text", "text": "look"}
    img = d["content"][1]
    assert img["type"] == "image" and {"url", "data", "mime_type", "detail"} <= set(img)
    assert (img["url"], img["data"], img["mime_type"], img["detail"]) == (None, "aGk=", "image/png", "low")
    f = d["content"][2]
    assert f["type"] == "file" and {"url", "data", "mime_type", "filename"} <= set(f)
    assert (f["url"], f["filename"]) == ("https://x/f.pdf", "f.pdf")
    assert entry_from_dict(json.loads(json.dumps(d))) == e


def test_tool_result_dict_omits_parts_when_absent_and_keeps_them_when_present() -> None:
    d = entry_to_dict(ToolResultEntry("c1", "out"))
    assert "parts" not in d
    assert {"type", "call_id", "output", "is_error", "raw"} == set(d)
    d = entry_to_dict(ToolResultEntry("c1", "out", parts=[ImagePart(url="https://x/i.png")]))
    assert d["parts"][0]["type"] == "image"
    assert entry_from_dict(d).parts == [ImagePart(url="https://x/i.png")]  # type: ignore[union-attr]


def test_tool_result_raw_is_made_json_safe() -> None:
    @dataclass
    class DC:
        a: int
        b: list[float]

    cases: list[tuple[Any, Any]] = [
        (Verdict(label="x", score=1), {"label": "x", "score": 1}),
        (DC(1, [1.5, math.nan]), {"a": 1, "b": [1.5, None]}),
        ({"k": (1, 2), "n": math.inf}, {"k": [1, 2], "n": None}),
        (object(), None),
        (math.nan, None),
    ]
    for raw, expected in cases:
        d = entry_to_dict(ToolResultEntry("c", "o", raw=raw))
        assert d["raw"] == expected, raw
        json.dumps(d, allow_nan=False)


def test_entry_from_dict_rejects_unknown_type_and_ignores_unknown_fields() -> None:
    with pytest.raises(ValueError):
        entry_from_dict({"type": "handoff", "to": "x"})
    with pytest.raises(ValueError):
        entry_from_dict({"role": "user", "content": "no type"})
    # 0.9.119's stability promise: unknown fields are ignored (strict=True still refuses them).
    assert entry_from_dict({"type": "assistant_text", "content": "x", "id": None, "surprise": 1}) == AssistantTextEntry(
        "x"
    )
    with pytest.raises(ValueError):
        entry_from_dict({"type": "assistant_text", "content": "x", "id": None, "surprise": 1}, strict=True)


def test_conversions() -> None:
    entries = [
        InputEntry("user", "q"),
        ReasoningEntry("think"),
        AssistantTextEntry("let me"),
        ToolCallEntry("c1", "add", "{}"),
        ToolCallEntry("c2", "add", "{}"),
        ToolResultEntry("c1", "1"),
        ToolResultEntry("c2", "2"),
        AssistantTextEntry("done"),
    ]
    msgs = entries_to_messages(entries)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "assistant"]
    merged = msgs[1]
    assert (merged.reasoning, merged.content, [c.id for c in merged.tool_calls]) == ("think", "let me", ["c1", "c2"])
    assert msgs[2].tool_call_id == "c1"
    assert messages_to_entries(msgs) == entries
    assert input_to_entries("hi") == [InputEntry("user", "hi")]
    assert input_to_entries([system("s"), user("u")]) == [InputEntry("system", "s"), InputEntry("user", "u")]
    from lovia.transcript import assistant_to_entries

    am = Message("assistant", "t", reasoning="r", tool_calls=[ToolCall("c", "n", "{}")])
    assert [e.type for e in assistant_to_entries(am)] == ["reasoning", "assistant_text", "tool_call"]


def test_structure_helpers() -> None:
    es = [
        InputEntry("system", "s1"),
        InputEntry("system", "s2"),
        InputEntry("user", "u"),
        ToolCallEntry("c1", "t", "{}"),
        ToolResultEntry("c1", "r"),
        ToolCallEntry("c2", "t", "{}"),
    ]
    assert leading_system_count(es) == 2
    head, body = split_system(es)
    assert head == es[:2] and body == es[2:]
    assert drop_dangling_tool_calls(es) == es[:5]
    window = safe_window(es[:5], tail=1)
    assert ToolResultEntry("c1", "r") not in window or ToolCallEntry("c1", "t", "{}") in window
    window = safe_window(es[:5], head=1, tail=1)
    calls_ = {e.call_id for e in window if isinstance(e, ToolCallEntry)}
    results = {e.call_id for e in window if isinstance(e, ToolResultEntry)}
    assert calls_ == results


# ======================================================== 1.10 / 1.11 stores and options (the parts the loop relies on)


def test_segment_and_checkpoint_options_shapes() -> None:
    assert names(Segment) == ["run_id", "entries", "meta"]
    assert Segment("r", []).meta is None
    assert names(CheckpointOptions)[:5] == [
        "checkpointer",
        "run_id",
        "if_run_exists",
        "delete_on_success",
        "resume_from",
    ]
    cp = InMemoryCheckpointer()
    opts = CheckpointOptions(cp, "id")
    assert (opts.checkpointer, opts.run_id, opts.if_run_exists, opts.delete_on_success, opts.resume_from) == (
        cp,
        "id",
        "resume",
        False,
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.run_id = "other"  # type: ignore[misc]
    for bad in [
        lambda: CheckpointOptions(),
        lambda: CheckpointOptions(cp, ""),
        lambda: CheckpointOptions(cp, "id", if_run_exists="sometimes"),  # type: ignore[arg-type]
        lambda: CheckpointOptions(resume_from=RunSnapshot("a", [], "x"), run_id="b"),
        lambda: CheckpointOptions(resume_from=RunSnapshot("a", [], "x"), delete_on_success=True),
    ]:
        with pytest.raises(UserError):
            bad()


def test_run_head_and_snapshot_shapes() -> None:
    head_fields = [
        "agent_name",
        "usage",
        "turns",
        "status",
        "output",
        "error",
        "last_input_tokens",
        "context_state",
        "updated_at",
    ]
    assert [n for n in names(RunHead) if n in head_fields] == head_fields
    h = RunHead("a")
    assert (h.usage, h.turns, h.status, h.output, h.error, h.last_input_tokens, h.context_state) == (
        Usage(),
        0,
        "running",
        None,
        None,
        None,
        {},
    )
    assert isinstance(h.updated_at, float)
    assert RunHead.from_json(h.to_json()) == h and RunHead.from_dict(h.to_dict()) == h
    snap = RunSnapshot.from_parts("r1", [InputEntry("user", "hi")], h)
    assert names(RunSnapshot)[:2] == ["run_id", "entries"]
    assert set(head_fields) <= set(names(RunSnapshot))
    assert snap.head == h
    assert RunSnapshot.from_json(snap.to_json()) == snap and RunSnapshot.from_dict(snap.to_dict()) == snap


async def test_session_append_idempotent_on_run_id(tmp_path: Any) -> None:
    for session in (InMemorySession(), SQLiteSession(str(tmp_path / "s.db"))):
        rid = await session.append("s", [InputEntry("user", "a")], run_id="r1", meta={"k": 1})
        assert rid == "r1"
        await session.append("s", [InputEntry("user", "b")], run_id="r1")
        generated = await session.append("s", [InputEntry("user", "c")])
        assert isinstance(generated, str) and generated
        segs = await session.segments("s")
        assert [s.run_id for s in segs] == ["r1", generated]
        assert segs[0].meta == {"k": 1}
        assert await session.load("s") == [InputEntry("user", "a"), InputEntry("user", "c")]
        await session.clear("s")
        assert await session.load("s") == []
        close = getattr(session, "close", None)
        if close is not None:
            out = close()
            if inspect.isawaitable(out):
                await out


# =========================================================================== 3. loop order and checkpoint write points


def _subsequence(log: list[Any], wanted: list[Any]) -> bool:
    it = iter(log)
    return all(any(item == w for item in it) for w in wanted)


async def test_loop_order_and_checkpoint_write_points() -> None:
    log: list[Any] = []
    cp = RecordingCheckpointer(log)
    session = RecordingSession(log)
    box = Mailbox()
    box.push("steer")
    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3")])
    agent = mk(provider, add, hooks=logging_hooks(log))
    result = await Runner.run(
        agent, "hi", mailbox=box, session=session, session_id="s", checkpoint=CheckpointOptions(cp, "loop-1")
    )
    assert result.output == "3"
    expected = [
        ("ev", "RunStarted"),
        ("ev", "TurnStarted"),
        ("ev", "UserMessageInjected"),
        ("cp", ("input",), "running"),  # (a) after a non-empty drain: the steer entry
        ("ev", "MessageCompleted"),
        ("cp", ("tool_call",), "running"),  # (b) after the model reply, before tools
        ("ev", "ToolCallStarted"),
        ("ev", "ToolCallCompleted"),
        ("cp", ("tool_result",), "running"),  # (c) after every tool result
        ("ev", "TurnEnded"),
        ("cp", (), "running"),  # (d) turn end
        ("ev", "TurnStarted"),
        ("ev", "MessageCompleted"),
        ("cp", ("assistant_text",), "running"),
        ("ev", "TurnEnded"),
        ("cp", (), "completed"),  # (f) terminal
        ("session", 5),  # then the session append
        ("ev", "RunCompleted"),  # then RunCompleted
    ]
    assert _subsequence(log, expected), log
    # the session append comes after the completed checkpoint and before RunCompleted, exactly once
    assert [x for x in log if x[0] == "session"] == [("session", 5)]
    assert log.index(("session", 5)) > log.index(("cp", (), "completed"))
    # no model reply is saved before the mailbox drain of its own turn
    assert log.index(("ev", "UserMessageInjected")) < log.index(("ev", "MessageCompleted"))
    snap = await cp.load("loop-1")
    assert snap is not None and snap.status == "completed" and snap.output == "3"
    assert snap.entries == result.entries
    assert (await session.segments("s"))[0].run_id == "loop-1"


async def test_tool_calls_are_persisted_before_they_execute() -> None:
    cp = InMemoryCheckpointer()
    seen: list[list[str]] = []

    @tool
    async def look(ctx: RunContext[Any]) -> str:
        """Look."""
        snap = await cp.load(ctx.run_id)
        assert snap is not None
        seen.append([e.type for e in snap.entries])
        return "ok"

    await Runner.run(
        mk(ScriptedProvider([call("look"), text("x")]), look), "hi", checkpoint=CheckpointOptions(cp, "persist-1")
    )
    assert seen == [["input", "tool_call"]]


async def test_failure_path_terminal_save_no_session_append_and_run_failed() -> None:
    log: list[Any] = []
    cp = RecordingCheckpointer(log)
    session = RecordingSession(log)
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), fail(ProviderError("bad request", retryable=False))])
    handle = Runner.stream(
        mk(provider, add, hooks=logging_hooks(log)),
        "hi",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(cp, "f1"),
    )
    evs = await collect(handle)
    with pytest.raises(ProviderError):
        await handle
    assert isinstance(evs[-1], events.RunFailed)
    assert not any(x[0] == "session" for x in log)
    assert await session.load("s") == []
    assert log.index(("cp", (), "failed")) < log.index(("ev", "RunFailed"))
    snap = await cp.load("f1")
    assert snap is not None and snap.status == "failed"
    assert snap.error is not None and snap.error["type"] == "ProviderError"
    assert snap.turns == 1  # the failed turn added nothing and is not counted


@pytest.mark.parametrize(
    "error,status",
    [
        (ProviderError("overloaded", retryable=True), "interrupted"),
        (ProviderError("bad", retryable=False), "failed"),
        (TimeoutError("slow"), "interrupted"),
        (ConnectionError("reset"), "interrupted"),
        (ValueError("bug"), "failed"),
    ],
)
async def test_terminal_status_classification(error: BaseException, status: str) -> None:
    cp = InMemoryCheckpointer()
    provider = ScriptedProvider([fail(error)])
    with pytest.raises(type(error)):
        await Runner.run(mk(provider, retry=None), "hi", checkpoint=CheckpointOptions(cp, "c1"))
    snap = await cp.load("c1")
    assert snap is not None and snap.status == status


async def test_cancel_max_turns_budget_classify_as_interrupted() -> None:
    cp = InMemoryCheckpointer()
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(
            mk(ScriptedProvider([call("add", {"a": 1, "b": 1})] * 2), add),
            "hi",
            max_turns=1,
            checkpoint=CheckpointOptions(cp, "m"),
        )
    token = CancelToken()
    token.cancel()
    with pytest.raises(RunCancelled):
        await Runner.run(
            mk(ScriptedProvider([text("x")])), "hi", cancel_token=token, checkpoint=CheckpointOptions(cp, "c")
        )
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            mk(ScriptedProvider([text("xxxxxxxxxxxxxxxx")])),  # reports 1 + 1 tokens
            "hi",
            budget=RunBudget(max_total_tokens=1),
            checkpoint=CheckpointOptions(cp, "b"),
        )
    for rid in ("m", "c", "b"):
        snap = await cp.load(rid)
        assert snap is not None and snap.status == "interrupted", rid


# --------------------------------------------------------------------------- resume / replay


def _tool_script() -> list[Any]:
    return [call("add", {"a": 2, "b": 3}), text("five")]


async def test_entries_identical_fresh_vs_resumed_and_replayed(tmp_path: Any) -> None:
    fresh = await Runner.run(mk(ScriptedProvider(_tool_script()), add), "2+3?")

    cp = SQLiteCheckpointer(str(tmp_path / "cp.db"))
    crashing = ScriptedProvider([call("add", {"a": 2, "b": 3}), fail(ProviderError("down", retryable=True))])
    with pytest.raises(ProviderError):
        await Runner.run(mk(crashing, add, retry=None), "2+3?", checkpoint=CheckpointOptions(cp, "r1"))
    snap = await cp.load("r1")
    assert snap is not None and snap.status == "interrupted"

    resumed_provider = ScriptedProvider([text("five")])
    guard_calls: list[Any] = []
    agent = mk(resumed_provider, add, input_guardrails=[lambda msgs, ctx: guard_calls.append(msgs)])
    resumed = await Runner.run(agent, "IGNORED NEW INPUT", checkpoint=CheckpointOptions(cp, "r1"))
    assert resumed.entries == fresh.entries
    assert resumed.output == "five"
    assert guard_calls == []  # input guardrails skipped on resume
    assert all("IGNORED" not in m.text for m in resumed_provider.calls[0])  # new input ignored
    assert resumed.turns == fresh.turns

    replay_provider = ScriptedProvider([])
    handle = Runner.stream(mk(replay_provider, add), "again", checkpoint=CheckpointOptions(cp, "r1"))
    evs = await collect(handle)
    replayed = await handle
    assert kinds(evs) == ["RunStarted", "RunCompleted"]
    assert replay_provider.calls == []
    assert replayed.entries == fresh.entries and replayed.output == "five"
    assert replayed.finish_reason is None
    close = getattr(cp, "close", None)
    if close is not None:
        out = close()
        if inspect.isawaitable(out):
            await out


async def test_resume_reexecutes_dangling_calls_under_the_same_turn() -> None:
    cp = InMemoryCheckpointer()
    runs: list[int] = []

    @tool
    def act(ctx: RunContext[Any]) -> str:
        """Act."""
        runs.append(ctx.turn)
        return "acted"

    # Persist a snapshot whose last entry is a tool call without a result (a crash mid-tool).
    head = RunHead("main", turns=1, status="interrupted")
    await cp.append("d1", [InputEntry("user", "do it"), ToolCallEntry("call_act", "act", "{}")], head)
    log: list[Any] = []
    provider = ScriptedProvider([text("done")])
    handle = Runner.stream(
        mk(provider, act, hooks=logging_hooks(log)), "ignored", checkpoint=CheckpointOptions(cp, "d1")
    )
    evs = await collect(handle)
    result = await handle
    assert runs == [1]
    turns = [(type(e).__name__, e.turn) for e in evs if isinstance(e, (events.TurnStarted, events.TurnEnded))]
    assert turns == [("TurnStarted", 1), ("TurnEnded", 1), ("TurnStarted", 2), ("TurnEnded", 2)]
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]
    assert result.turns == 2


async def test_if_run_exists_policies() -> None:
    cp = InMemoryCheckpointer()
    await Runner.run(mk(ScriptedProvider([text("first")])), "hi", checkpoint=CheckpointOptions(cp, "p"))
    with pytest.raises(UserError):
        await Runner.run(
            mk(ScriptedProvider([text("x")])), "hi", checkpoint=CheckpointOptions(cp, "p", if_run_exists="fail")
        )
    fresh_fail = await Runner.run(
        mk(ScriptedProvider([text("new")])), "hi", checkpoint=CheckpointOptions(cp, "q", if_run_exists="fail")
    )
    assert fresh_fail.output == "new"
    restarted = await Runner.run(
        mk(ScriptedProvider([text("second")])), "hi", checkpoint=CheckpointOptions(cp, "p", if_run_exists="restart")
    )
    assert restarted.output == "second"
    with pytest.raises(UserError):
        await Runner.run(
            mk(ScriptedProvider([text("x")])), [], checkpoint=CheckpointOptions(cp, "none", if_run_exists="resume_only")
        )
    replayed = await Runner.run(
        mk(ScriptedProvider([])), [], checkpoint=CheckpointOptions(cp, "p", if_run_exists="resume_only")
    )
    assert replayed.output == "second"


async def test_resume_continues_a_failed_run() -> None:
    cp = InMemoryCheckpointer()
    with pytest.raises(ProviderError):
        await Runner.run(
            mk(ScriptedProvider([fail(ProviderError("bad", retryable=False))])),
            "hi",
            checkpoint=CheckpointOptions(cp, "f"),
        )
    assert (await cp.load("f")).status == "failed"  # type: ignore[union-attr]
    result = await Runner.run(mk(ScriptedProvider([text("ok")])), "hi", checkpoint=CheckpointOptions(cp, "f"))
    assert result.output == "ok" and result.entries == [InputEntry("user", "hi"), AssistantTextEntry("ok")]


async def test_replay_heals_session_append_and_delete_on_success() -> None:
    cp = InMemoryCheckpointer()
    session = InMemorySession()
    first = await Runner.run(mk(ScriptedProvider([text("ok")])), "hi", checkpoint=CheckpointOptions(cp, "h"))
    # a replay with a session re-appends the stored entries (idempotent)
    for _ in range(2):
        await Runner.run(
            mk(ScriptedProvider([])), "hi", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "h")
        )
    segs = await session.segments("s")
    assert [s.run_id for s in segs] == ["h"] and segs[0].entries == first.entries

    await Runner.run(
        mk(ScriptedProvider([text("ok")])),
        "hi",
        session=session,
        session_id="s2",
        checkpoint=CheckpointOptions(cp, "d", delete_on_success=True),
    )
    assert await cp.load("d") is None
    assert len(await session.segments("s2")) == 1


# ------------------------------------------------------------------- guardrails and handoff (as the loop orders them)


async def test_input_guardrail_sees_system_history_input_and_trips() -> None:
    seen: list[list[str]] = []

    def guard(msgs: list[Message], ctx: RunContext[Any]) -> Any:
        seen.append([m.role for m in msgs])
        return "forbidden topic" if "secret" in msgs[-1].text else None

    session = InMemorySession()
    await session.append("s", [InputEntry("user", "old"), AssistantTextEntry("reply")])
    provider = ScriptedProvider([text("x")])
    with pytest.raises(GuardrailTripped) as info:
        await Runner.run(mk(provider, input_guardrails=[guard]), "tell me the secret", session=session, session_id="s")
    assert seen == [["system", "user", "assistant", "user"]]
    assert info.value.reason == "forbidden topic"
    assert provider.calls == []  # before the first model call


async def test_output_guardrail_runs_before_checkpoint_finalization() -> None:
    cp = InMemoryCheckpointer()
    statuses: list[str | None] = []

    async def guard(output: Any, ctx: RunContext[Any]) -> bool:
        snap = await cp.load(ctx.run_id)
        statuses.append(snap.status if snap else None)
        return True

    with pytest.raises(GuardrailTripped):
        await Runner.run(
            mk(ScriptedProvider([text("x")]), output_guardrails=[guard]), "hi", checkpoint=CheckpointOptions(cp, "g")
        )
    assert statuses == ["running"]
    assert (await cp.load("g")).status == "failed"  # type: ignore[union-attr]


async def test_handoff_swaps_system_head_and_keeps_run_spine() -> None:
    log: list[Any] = []
    target_provider = ScriptedProvider([text("billing here")])
    target = Agent(name="billing", instructions="BILLING", model=target_provider, hooks=logging_hooks(log))
    provider = ScriptedProvider([call("transfer_to_billing", {"reason": "money"})])
    entry = mk(provider, handoffs=[target], hooks=logging_hooks(log))
    handle = Runner.stream(entry, "refund", extra_instructions="EXTRA")
    evs = await collect(handle)
    result = await handle
    assert result.final_agent is target and result.output == "billing here"
    hand = next(e for e in evs if isinstance(e, events.HandoffOccurred))
    assert hand.from_agent is entry and hand.to_agent is target
    k = kinds(evs)
    assert k.index("TurnEnded") < k.index("HandoffOccurred")
    assert log.count(("ev", "HandoffOccurred")) == 2  # both agents' hooks
    prompt = target_provider.calls[0]
    assert prompt[0].role == "system" and prompt[0].text == "BILLING\n\nEXTRA"
    assert [m.role for m in prompt[1:]] == ["user", "assistant", "tool"]
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]
    params = list(inspect.signature(Handoff).parameters)
    assert params[:4] == ["target", "name", "description", "on_handoff"]
    h = Handoff(target)
    assert (h.name, h.description, h.on_handoff) == (None, None, None)


async def test_policy_tools_yield_to_an_explicit_tool_of_the_same_name() -> None:
    @tool(name="recall_tool_result")
    def mine(ref: str) -> str:
        """Mine."""
        return "mine"

    provider = ScriptedProvider([call("recall_tool_result", {"ref": "x"}), text("ok")])
    result = await Runner.run(mk(provider, mine), "hi")
    assert result.entries[2].output == "mine"  # type: ignore[union-attr]


async def test_agent_as_tool_child_sees_only_its_input_and_usage_folds_in() -> None:
    child_provider = ScriptedProvider([text("child answer")])
    child = Agent(name="researcher", instructions="CHILD", model=child_provider)
    ask = child.as_tool()
    parent = mk(ScriptedProvider([call("ask_researcher", {"input": "dig"}), text("parent")]), ask)
    result = await Runner.run(parent, "top secret parent prompt")
    assert [m.text for m in child_provider.calls[0]] == ["CHILD", "dig"]
    assert result.entries[2].output == "child answer"  # type: ignore[union-attr]
    own = 2 + 2  # the parent's two scripted turns, 1 + 1 tokens each
    assert result.usage.input_tokens + result.usage.output_tokens > own


# --------------------------------------------------------------------------- context policy seam as the loop uses it


class DropSystemPolicy:
    """A careless custom policy: it returns only the last entry (dropping the system head)."""

    async def compact(self, req: Any) -> Any:
        from lovia.context.base import ContextResult

        return ContextResult(entries=list(req.entries[-1:]), changed=True)


async def test_system_entries_re_prepended_when_the_policy_drops_them() -> None:
    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(mk(provider, context_policy=DropSystemPolicy()), "hi")
    assert [m.role for m in provider.calls[0]] == ["system", "user"]
    assert provider.calls[0][0].text == "Be brief."
    assert result.entries == [InputEntry("user", "hi"), AssistantTextEntry("ok")]


class OverflowPolicy:
    def __init__(self, compacts: bool) -> None:
        self.compacts = compacts
        self.requests: list[Any] = []

    async def compact(self, req: Any) -> Any:
        from lovia.context.base import ContextResult

        self.requests.append((req.overflow, req.reported_window))
        if req.overflow:
            return ContextResult(entries=list(req.entries), changed=True, compacted=self.compacts, reason="overflow")
        return ContextResult(entries=list(req.entries))


@pytest.mark.parametrize("compacts", [True, False])
async def test_context_overflow_reruns_the_policy_once(compacts: bool) -> None:
    policy = OverflowPolicy(compacts)
    provider = ScriptedProvider([fail(ContextOverflowError("too long", reported_window=1000)), text("fits")])
    handle = Runner.stream(mk(provider, context_policy=policy, retry=NO_WAIT), "hi")
    evs = await collect(handle)
    if compacts:
        result = await handle
        assert result.output == "fits" and result.turns == 1
        assert policy.requests == [(False, None), (True, 1000)]
        compacted = [e for e in evs if isinstance(e, events.ContextCompacted)]
        assert len(compacted) == 1 and compacted[0].notice.reactive is True
    else:
        with pytest.raises(ContextOverflowError):
            await handle
        assert len(provider.calls) == 1


async def test_session_segment_meta_timing_and_context_state() -> None:
    class StatefulPolicy:
        async def compact(self, req: Any) -> Any:
            from lovia.context.base import ContextResult

            req.scratch["seen"] = req.scratch.get("seen", 0) + 1
            return ContextResult(entries=list(req.entries))

    session = InMemorySession()
    await Runner.run(
        mk(ScriptedProvider([text("a")]), context_policy=StatefulPolicy()), "hi", session=session, session_id="s"
    )
    meta = (await session.segments("s"))[0].meta
    assert meta is not None
    assert meta["context_state"] == {"seen": 1}
    timing = meta["timing"]
    assert timing["started_at"] <= timing["finished_at"]
    await Runner.run(
        mk(ScriptedProvider([text("b")]), context_policy=StatefulPolicy()), "again", session=session, session_id="s"
    )
    assert (await session.segments("s"))[1].meta["context_state"] == {"seen": 2}  # type: ignore[index]


async def test_mid_batch_cancel_cancels_running_async_siblings() -> None:
    token = CancelToken()
    finished: list[str] = []

    @tool
    async def long() -> str:
        """Long."""
        await asyncio.sleep(3)
        finished.append("long")
        return "long"

    @tool
    async def stop() -> str:
        """Stop."""
        await asyncio.sleep(0.01)
        token.cancel("user stop")
        return "stopped"

    provider = ScriptedProvider([batch(("long", {}), ("stop", {})), text("never")])
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(Runner.run(mk(provider, long, stop), "hi", cancel_token=token), 2)
    assert finished == []


async def test_other_calls_keep_running_while_one_waits_for_approval() -> None:
    @tool
    async def work() -> str:
        """Work."""
        return "worked"

    provider = ScriptedProvider([batch(("work", {}), ("pay", {"amount": 1})), text("x")])
    handle = Runner.stream(mk(provider, work, pay), "go")
    channel = handle.approvals
    order: list[str] = []
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            order.append("approval")
            pending_id = ev.call.id
            asyncio.get_running_loop().call_later(0.05, channel.approve, pending_id)
        if isinstance(ev, events.ToolCallCompleted):
            order.append(ev.call.name)
    assert order == ["approval", "work", "pay"]
    result = await handle
    assert not any(e.is_error for e in result.entries if isinstance(e, ToolResultEntry))


async def test_replay_with_missing_agent_falls_back_and_resume_with_missing_agent_errors() -> None:
    cp = InMemoryCheckpointer()
    await cp.append(
        "done",
        [InputEntry("user", "hi"), AssistantTextEntry("ok")],
        RunHead("ghost", turns=1, status="completed", output="ok"),
    )
    entry = mk(ScriptedProvider([]))
    result = await Runner.run(entry, "hi", checkpoint=CheckpointOptions(cp, "done"))
    assert result.output == "ok" and result.final_agent is entry

    await cp.append("live", [InputEntry("user", "hi")], RunHead("ghost", turns=0, status="interrupted"))
    with pytest.raises(LoviaError):
        await Runner.run(mk(ScriptedProvider([text("x")])), "hi", checkpoint=CheckpointOptions(cp, "live"))


async def test_budget_max_seconds_clock_starts_at_first_check() -> None:
    budget = RunBudget(max_seconds=0.05)
    await asyncio.sleep(0.1)  # time before the run does not count

    @tool
    async def nap() -> str:
        """Nap."""
        await asyncio.sleep(0.1)
        return "z"

    with pytest.raises(BudgetExceeded):
        await Runner.run(mk(ScriptedProvider([call("nap"), call("nap"), text("x")]), nap), "hi", budget=budget)


async def test_replay_reruns_no_hooks_and_no_guardrails() -> None:
    cp = InMemoryCheckpointer()
    await Runner.run(mk(ScriptedProvider([text("ok")])), "hi", checkpoint=CheckpointOptions(cp, "rp"))
    log: list[Any] = []
    guards: list[Any] = []
    agent = mk(
        ScriptedProvider([]),
        hooks=logging_hooks(log),
        input_guardrails=[lambda m, c: guards.append("in")],
        output_guardrails=[lambda o, c: guards.append("out")],
    )
    handle = Runner.stream(agent, "hi", checkpoint=CheckpointOptions(cp, "rp"))
    assert kinds(await collect(handle)) == ["RunStarted", "RunCompleted"]
    assert (await handle).output == "ok"
    assert guards == []
    assert ("ev", "TurnStarted") not in log and ("ev", "RunCompleted") not in log  # seed: hooks are not re-run
