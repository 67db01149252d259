"""The compatibility names of the public surface behave as the documentation says."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lovia import Agent, CheckpointOptions, InMemoryCheckpointer, InMemorySession, Runner
from lovia.exceptions import InvalidToolArguments, LoviaError, OutputValidationError, ToolError, UserError
from lovia.run_context import RunContext
from lovia.testing import ScriptedProvider, text


# ------------------------------------------------------------------ lovia.parts / messages
def test_parts_live_in_lovia_parts_and_old_paths_still_work(tmp_path: Path) -> None:
    from lovia import messages, parts

    assert messages.ImagePart is parts.ImagePart and messages.FilePart is parts.FilePart
    png = tmp_path / "shot.PNG"
    png.write_bytes(b"\x89PNG-bytes")
    img = parts.ImagePart.from_path(png)
    assert img.mime_type == "image/png" and base64.b64decode(img.data or "") == b"\x89PNG-bytes"
    assert img.detail is None and img.data_url().startswith("data:image/png;base64,")
    with pytest.raises(ValueError, match="mime_type"):
        parts.ImagePart.from_path(tmp_path / "x.unknown-suffix")
    with pytest.raises(ValueError, match="exactly one"):
        parts.ImagePart()
    with pytest.raises(ValueError, match="needs mime_type"):
        parts.FilePart(data="AAAA")
    doc = parts.FilePart.from_path(png, filename="renamed.png")
    assert doc.filename == "renamed.png" and doc.mime_type == "image/png"


def test_part_helpers() -> None:
    from lovia.parts import (
        FilePart,
        ImagePart,
        TextPart,
        coerce_parts,
        image_mime,
        normalize_content,
        project_parts,
        text_of,
    )

    assert image_mime("a/b/photo.JPG") == "image/jpeg" and image_mime("notes.txt") is None
    one = TextPart("hi")
    assert normalize_content(one) == [one] and normalize_content("x") == "x" and normalize_content(None) is None
    with pytest.raises(TypeError):
        normalize_content([one, "bare string"])  # type: ignore[list-item]
    mixed = [TextPart("a"), ImagePart(url="https://x/i.png"), TextPart("b")]
    assert text_of(mixed) == "ab" and text_of(None) == ""
    assert coerce_parts({"not": "parts"}) is None and coerce_parts(one) == [one]
    assert coerce_parts([one, 3]) is None
    projected = project_parts([TextPart("see"), FilePart.from_url("https://x/r.pdf", filename="r.pdf")])
    assert projected == "see\n[file: r.pdf]"


def test_assistant_turn_and_tool_message() -> None:
    from lovia.messages import AssistantTurn, ToolCall, Usage, tool_message

    turn = AssistantTurn("done", [ToolCall("c1", "f", "{}")], Usage(3, 4), "stop")
    msg = turn.to_message()
    assert msg.role == "assistant" and msg.text == "done" and msg.tool_calls[0].name == "f"
    assert tool_message("c1", "42").tool_call_id == "c1"
    usage = Usage(1, 2)
    copy = usage.clone()
    copy.add(Usage(1, 1))
    assert usage.total_tokens == 3 and copy.total_tokens == 5


# ------------------------------------------------------------------ steering
def test_mailbox_lives_in_steering_and_reaches_the_run() -> None:
    from lovia import Mailbox
    from lovia.events import UserMessageInjected
    from lovia.reliability import Mailbox as OldPath
    from lovia.steering import Mailbox as NewPath

    assert Mailbox is NewPath is OldPath
    box = NewPath()
    token = box.push("withdrawn")
    assert box.remove(token) and not box.remove(token)
    with pytest.raises(TypeError):
        box.push(None)  # type: ignore[arg-type]
    box.push("focus on errors")
    seen: list[list[str]] = []

    def model(entries: list[Any], tools: Any) -> Any:
        seen.append([getattr(e, "content", "") for e in entries])
        return text("ok")

    agent = Agent(name="a", model=ScriptedProvider(model))

    async def go() -> list[Any]:
        handle = Runner.stream(agent, "start", mailbox=box)
        return [ev async for ev in handle if isinstance(ev, UserMessageInjected)]

    injected = asyncio.run(go())
    assert [ev.content for ev in injected] == ["focus on errors"]
    assert "focus on errors" in seen[0] and len(box) == 0


# ------------------------------------------------------------------ schema
class Point(BaseModel):
    x: int
    y: int = 0


def test_schema_functions() -> None:
    from lovia.schema import build_args_validator, coerce_output, function_args_schema, model_json_schema, validate_args

    def place(ctx: RunContext[Any], where: Point, label: str = "p") -> str:
        return label

    schema, names = function_args_schema(place)
    assert names == ["where", "label"] and schema["required"] == ["where"]
    assert "ctx" not in schema["properties"]
    strict, _ = function_args_schema(place, strict=True)
    assert strict["additionalProperties"] is False
    args = validate_args(place, {"where": {"x": "3"}})
    assert args["where"] == Point(x=3) and args["label"] == "p"
    with pytest.raises(InvalidToolArguments):
        build_args_validator(place)({"where": {"x": "nope"}})
    assert model_json_schema(Point)["required"] == ["x"]
    assert coerce_output(list[int], ["1", 2]) == [1, 2] and coerce_output(str, 5) == 5
    with pytest.raises(OutputValidationError) as info:
        coerce_output(Point, {"y": 1})
    assert info.value.output_type_name == "Point" and info.value.hint


# ------------------------------------------------------------------ http_config / types
def test_http_config_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lovia import http_config

    monkeypatch.delenv("LOVIA_PROVIDER_TIMEOUT", raising=False)
    assert http_config.resolve_timeout(None) == http_config.DEFAULT_TIMEOUT == 300.0
    monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", "12.5")
    assert http_config.resolve_timeout(None) == 12.5 and http_config.resolve_timeout(3) == 3.0
    monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", "soon")
    assert http_config.resolve_timeout(None) == 300.0  # not a number: ignored
    monkeypatch.setenv("LOVIA_PROVIDER_TRUST_ENV", "1")
    assert http_config.resolve_trust_env(None) is True and http_config.resolve_trust_env(False) is False
    monkeypatch.setenv("LOVIA_HTTP_INSECURE", "1")
    assert http_config.resolve_verify() is False
    monkeypatch.delenv("LOVIA_HTTP_INSECURE")
    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(UserError):
        http_config.resolve_verify()


def test_types_module() -> None:
    from lovia.types import JsonObject, JsonSchema, JsonValue

    value: JsonValue = {"a": [1, 2.0, None, True, "s"]}
    obj: JsonObject = {"k": value}
    schema: JsonSchema = {"type": "object"}
    assert json.loads(json.dumps(obj)) == obj and schema["type"] == "object"


# ------------------------------------------------------------------ plugins
def test_plugins_package_and_setup_forms() -> None:
    from lovia.plugins import Plugin, PluginInstance
    from lovia.plugins.base import Plugin as BasePlugin
    from lovia.plugins.base import setup_plugin

    assert Plugin is BasePlugin
    received: list[Any] = []

    class WithCtx:
        name = "with-ctx"

        async def setup(self, ctx: Any) -> PluginInstance:
            received.append(ctx)
            return PluginInstance(instructions="from ctx")

    class Bare:
        name = "bare"

        async def setup(self) -> PluginInstance:
            return PluginInstance(instructions="bare")

    sentinel = object()
    assert isinstance(WithCtx(), Plugin) and isinstance(Bare(), Plugin)
    assert asyncio.run(setup_plugin(WithCtx(), sentinel)).instructions == "from ctx"  # type: ignore[arg-type]
    assert received == [sentinel]
    assert asyncio.run(setup_plugin(Bare(), None)).instructions == "bare"


# ------------------------------------------------------------------ context.policy
def test_context_policy_module() -> None:
    from lovia.context import base, policy
    from lovia.messages import Usage
    from lovia.transcript import InputEntry

    assert base.CompactionRequest is policy.CompactionRequest
    req = policy.CompactionRequest(entries=[InputEntry(role="user", content="hi")])
    assert req.provider is None and req.model is None and req.usage == Usage() and req.scratch == {}
    result = asyncio.run(policy.NoopContextPolicy().compact(req))
    assert result.entries == req.entries and not result.changed


# ------------------------------------------------------------------ session meta keys
def test_session_meta_keys_name_what_a_run_stores() -> None:
    from lovia.session import NOTICE_META_KEY, STATE_META_KEY, TIMING_META_KEY

    session = InMemorySession()
    agent = Agent(name="a", model=ScriptedProvider([text("hello")]))
    asyncio.run(Runner.run(agent, "hi", session=session, session_id="s1"))
    meta = asyncio.run(session.segments("s1"))[0].meta or {}
    assert set(meta["timing"]) >= {"started_at", "finished_at"}
    assert TIMING_META_KEY in meta and (STATE_META_KEY, NOTICE_META_KEY) == ("context_state", "context_notice")


# ------------------------------------------------------------------ approvals
def test_approval_scopes_keep_equal_call_ids_apart() -> None:
    from lovia.approvals import ApprovalChannel

    async def go() -> tuple[bool, bool, bool]:
        channel = ApprovalChannel()
        a = channel.register("call-1", scope="session-a")
        b = channel.register("call-1", scope="session-b")
        assert channel.is_pending("call-1", scope="session-a") and not channel.is_pending("call-1")
        assert channel.approve("call-1", scope="session-a")
        assert channel.release(scope="session-b") == 1
        assert not channel.reject("call-1", scope="nobody")
        c = channel.register("call-2")
        channel.discard("call-2")
        return await a, await b, await c

    assert asyncio.run(go()) == (True, False, False)


# ------------------------------------------------------------------ output repair
class Brief(BaseModel):
    title: str


def test_default_output_repair_quotes_the_error_and_retries() -> None:
    from lovia.output import REPAIR_PROMPT, DefaultOutputRepair, RepairOnce

    prompts: list[str] = []

    def model(entries: list[Any], tools: Any) -> Any:
        last = entries[-1]
        if getattr(last, "role", None) == "user" and "could not be used" in str(last.content):
            prompts.append(str(last.content))
            return text('{"title": "fixed"}')
        return text("no json here")

    agent = Agent(name="a", model=ScriptedProvider(model), output_type=Brief)
    result = asyncio.run(Runner.run(agent, "go"))
    assert result.output == Brief(title="fixed") and len(prompts) == 1
    assert REPAIR_PROMPT.split("{error}")[0] in prompts[0]
    exc = OutputValidationError("bad", raw="x")
    assert DefaultOutputRepair(max_attempts=2).build_prompt(exc, 2) is not None
    assert DefaultOutputRepair().build_prompt(exc, 2) is None and RepairOnce is DefaultOutputRepair


def test_structured_output_helpers() -> None:
    from lovia.output import (
        format_output_instructions,
        loads_lenient,
        parse_structured_output,
        resolve_structured_output,
        response_format_for,
    )

    assert resolve_structured_output(str, True) is None
    native = resolve_structured_output(Brief, True)
    prompt = resolve_structured_output(Brief, False)
    assert native is not None and native.use_native and prompt is not None and not prompt.use_native
    assert resolve_structured_output(list[int], True).use_native is False  # type: ignore[union-attr]
    assert "JSON Schema" in format_output_instructions(prompt) and response_format_for(native)["schema"]
    assert parse_structured_output(native, 'Sure:\n```json\n{"title": "t"}\n```') == Brief(title="t")
    assert parse_structured_output(native, {"title": "d"}) == Brief(title="d")
    with pytest.raises(OutputValidationError):
        parse_structured_output(native, {"nope": 1})
    assert loads_lenient("the list [1, 2] in prose") == [1, 2]
    with pytest.raises(ValueError):
        loads_lenient("nothing here")


# ------------------------------------------------------------------ tools / handoffs / hooks / guardrails
def test_tool_returns_images_flag() -> None:
    from lovia import tool
    from lovia.tools._tool import needs_vision

    @tool(returns_images=True)
    def screenshot() -> str:
        """Take a screenshot."""
        return ""

    @tool
    def plain() -> str:
        """Plain."""
        return ""

    assert screenshot.returns_images and not plain.returns_images
    assert needs_vision([screenshot, plain]) == ["screenshot"]


def test_handoff_and_agent_as_tool_helpers() -> None:
    from lovia.handoff import HANDOFF_TOOL_PREFIX, Handoff, agent_as_tool, build_handoff_tool

    billing = Agent(name="Billing Desk", model=ScriptedProvider([text("refunded")]))
    assert build_handoff_tool(Handoff(billing)).name == f"{HANDOFF_TOOL_PREFIX}billing_desk"
    as_tool = agent_as_tool(billing, name="ask_billing")
    caller = Agent(
        name="front",
        model=ScriptedProvider(
            [__import__("lovia.testing", fromlist=["call"]).call("ask_billing", {"input": "refund?"}), text("done")]
        ),
        tools=[as_tool],
    )
    result = asyncio.run(Runner.run(caller, "help"))
    outputs = [getattr(e, "output", None) for e in result.entries if getattr(e, "type", "") == "tool_result"]
    assert outputs == ["refunded"]


def test_guardrail_and_hook_functions() -> None:
    from lovia.events import RunStarted
    from lovia.exceptions import GuardrailTripped
    from lovia.guardrails import check_input_guardrails, check_output_guardrails
    from lovia.hooks import AgentHooks, dispatch
    from lovia.messages import user

    def no_secrets(messages: list[Any], ctx: Any) -> str | None:
        return "secret found" if any("secret" in m.text for m in messages) else None

    asyncio.run(check_input_guardrails([no_secrets], [user("hello")], None))  # type: ignore[arg-type]
    with pytest.raises(GuardrailTripped, match="secret found"):
        asyncio.run(check_input_guardrails([no_secrets], [user("a secret")], None))  # type: ignore[arg-type]
    with pytest.raises(GuardrailTripped):
        asyncio.run(check_output_guardrails([lambda out, ctx: len(out) > 3], "long answer", None))  # type: ignore[arg-type]
    hooks, seen = AgentHooks(), []
    hooks.on(RunStarted)(lambda ev, ctx: seen.append(ev))
    event = RunStarted(agent=Agent(name="a"))  # type: ignore[call-arg]
    asyncio.run(dispatch(hooks, event, None))  # type: ignore[arg-type]
    asyncio.run(dispatch(None, event, None))  # type: ignore[arg-type]
    assert seen == [event]


# ------------------------------------------------------------------ errors
def test_errors_take_structured_extras() -> None:
    err = LoviaError("boom", hint="retry", request_id="r-1")
    assert err.hint == "retry" and err.request_id == "r-1"  # type: ignore[attr-defined]
    assert ToolError("bad", tool_name="t").tool_name == "t" and InvalidToolArguments("x").tool_name is None
    from lovia.exceptions import ProviderError
    from lovia.reliability import is_retryable

    assert ProviderError("?").retryable is None and not is_retryable(ProviderError("?"))


# ------------------------------------------------------------------ agent / checkpoint additions
def test_render_system_prompt_and_resolve_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.providers import OpenAIChatProvider

    agent = Agent(name="a", instructions="Be brief.")

    @agent.instruction
    def tier(ctx: Any) -> str:
        return "Tier: gold"

    async def extra(ctx: Any) -> str:
        return "Extra."

    prompt = asyncio.run(agent.render_system_prompt(None, extra=extra))  # type: ignore[arg-type]
    assert prompt == "Be brief.\n\nTier: gold\n\nExtra."
    with pytest.raises(UserError, match="has no model"):
        agent.resolve_provider()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = Agent(name="b", model="openai:local-model:q4").resolve_provider()
    assert isinstance(provider, OpenAIChatProvider) and provider.model == "local-model:q4"
    scripted = ScriptedProvider([text("x")])
    assert Agent(name="c", model=scripted).resolve_provider() is scripted


def test_checkpoint_options_resolved_run_id() -> None:
    assert CheckpointOptions(InMemoryCheckpointer(), "job-7").resolved_run_id == "job-7"


# ------------------------------------------------------------------ model strings
@pytest.mark.parametrize(
    ("spec", "kind", "model"),
    [
        ("openai:qwen2.5:7b", "OpenAIChatProvider", "qwen2.5:7b"),
        ("org/model:free", "OpenAIChatProvider", "org/model:free"),
        ("OpenAI:gpt-x", "OpenAIChatProvider", "gpt-x"),
        ("openai-chat:gpt-x", "OpenAIChatProvider", "gpt-x"),
        ("Claude:sonnet", "AnthropicProvider", "sonnet"),
        ("  plain-model  ", "OpenAIChatProvider", "plain-model"),
    ],
)
def test_model_string_resolution(monkeypatch: pytest.MonkeyPatch, spec: str, kind: str, model: str) -> None:
    from lovia.providers import provider_from_string

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    provider = provider_from_string(spec)
    assert type(provider).__name__ == kind and provider.model == model


def test_misspelt_prefix_is_refused_and_extra_body_is_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.providers import provider_from_string, register_provider

    with pytest.raises(UserError, match="did you mean 'anthropic'"):
        provider_from_string("antropic:claude-x")
    got: dict[str, Any] = {}

    def factory(model: str, **kwargs: Any) -> Any:
        got.update(kwargs, model=model)
        return ScriptedProvider([text("x")])

    register_provider("surface-test", factory)
    provider_from_string("surface-test:m1", extra_body={"a": 1})
    assert got == {"model": "m1", "extra_body": {"a": 1}}
    got.clear()
    provider_from_string("surface-test:m2")
    assert got == {"model": "m2"}


def test_model_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia import model_from_env

    monkeypatch.delenv("LOVIA_MODEL", raising=False)
    with pytest.raises(UserError) as info:
        model_from_env()
    assert "LOVIA_MODEL" in (info.value.hint or "")
    assert model_from_env(required=False) is None
    monkeypatch.setenv("LOVIA_MODEL", " anthropic:m ")
    assert model_from_env() == "anthropic:m"


# ------------------------------------------------------------------ transcript additions
def test_delta_discriminators_and_known_fields() -> None:
    from lovia.messages import AssistantTurn, ToolCall, Usage
    from lovia.transcript import (
        EntryCompletedDelta,
        FinishDelta,
        InputEntry,
        ReasoningDelta,
        TextDelta,
        ToolCallDelta,
        UsageDelta,
        assistant_to_entries,
        known_fields,
    )

    kinds = [
        TextDelta("a").type,
        ReasoningDelta("b").type,
        ToolCallDelta(0).type,
        UsageDelta(Usage()).type,
        FinishDelta().type,
        EntryCompletedDelta(InputEntry(role="user", content="x")).type,
    ]
    assert kinds == [
        "text_delta",
        "reasoning_delta",
        "tool_call_delta",
        "usage_delta",
        "finish_delta",
        "entry_completed_delta",
    ]
    newer = {"type": "input", "role": "user", "content": "x", "written_by": "a newer lovia"}
    assert known_fields(newer) == {"type": "input", "role": "user", "content": "x"}
    with pytest.raises(ValueError):
        known_fields({"type": "hologram"})
    entries = assistant_to_entries(AssistantTurn("hi", [ToolCall("c1", "f", "{}")]))
    assert [e.type for e in entries] == ["assistant_text", "tool_call"]


def test_tool_type_names_and_result_to_text() -> None:
    from lovia.tools import ApprovalPredicate, ToolInvoker, ToolResultRenderer, result_to_text

    assert result_to_text("plain") == "plain" and result_to_text({"n": 1}) == '{"n": 1}'
    assert result_to_text(None) == "null"
    assert all(alias is not None for alias in (ApprovalPredicate, ToolInvoker, ToolResultRenderer))
