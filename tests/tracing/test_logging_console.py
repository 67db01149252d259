"""enable_logging (text, color, JSON lines, levels) and ConsoleTracer / InMemoryTracer."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from lovia import Agent, Runner, enable_logging, tool
from lovia.exceptions import UserError
from lovia.log_config import supports_color
from lovia.testing import ScriptedProvider, call, text
from lovia.tracing import ConsoleTracer, InMemoryTracer


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@pytest.fixture(autouse=True)
def _restore_logger() -> Iterator[None]:
    logger = logging.getLogger("lovia")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def _agent() -> Agent[None]:
    return Agent(name="calc", model=ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3")]), tools=[add])


async def test_json_lines_carry_event_and_fields() -> None:
    out = io.StringIO()
    enable_logging("debug", stream=out, json=True)
    result = await Runner.run(_agent(), "1+2")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    start = next(r for r in records if r.get("event") == "run.start")
    assert start["agent"] == "calc" and start["run_id"] == result.run_id and start["level"] == "INFO"
    assert start["logger"] == "lovia" and start["ts"].endswith("Z")
    done = next(r for r in records if r.get("event") == "run.done")
    assert done["turns"] == 2 and isinstance(done["tokens"], int)
    assert any(r.get("event") == "tool.start" and r["level"] == "DEBUG" for r in records)
    first_call = next(r for r in records if r.get("event") == "model.done")
    assert first_call["turn"] == 1 and first_call["tokens"] == first_call["in"] + first_call["out"] > 0


async def test_levels_filter_and_re_enabling_replaces_the_handler() -> None:
    out = io.StringIO()
    enable_logging("WARNING", stream=out)
    enable_logging(logging.INFO, stream=out, color=False)
    logger = logging.getLogger("lovia")
    assert sum(h.get_name() == "lovia-enable-logging" for h in logger.handlers) == 1
    await Runner.run(_agent(), "1+2")
    lines = out.getvalue().splitlines()
    assert any(" INFO    lovia: run.start agent=calc" in line for line in lines)
    assert not any("DEBUG" in line for line in lines) and "\033[" not in out.getvalue()
    assert logger.propagate is False


def test_color_follows_the_terminal_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = Tty()
    assert supports_color(tty) and not supports_color(io.StringIO())
    enable_logging(stream=tty)
    logging.getLogger("lovia").info("hello")
    assert tty.getvalue().startswith("\033[36m")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not supports_color(tty)


def test_an_unknown_level_is_a_user_error() -> None:
    with pytest.raises(UserError) as err:
        enable_logging("LOUD")
    assert err.value.hint is not None and "DEBUG" in err.value.hint


async def test_console_tracer_logs_an_indented_tree() -> None:
    out = io.StringIO()
    target = logging.getLogger("test.console")
    handler = logging.StreamHandler(out)
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    try:
        await Runner.run(_agent(), "1+2", tracer=ConsoleTracer(logger=target, detail_spans=True))
    finally:
        target.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("run ") and "agent=calc" in lines[-1]
    assert any(line.startswith("  turn ") for line in lines)
    assert any(line.startswith("    tool_call ") and "name=add" in line for line in lines)


async def test_in_memory_tracer_records_parents() -> None:
    coarse = InMemoryTracer()
    await Runner.run(_agent(), "1+2", tracer=coarse)
    assert [s.name for s in coarse.spans] == ["run", "model_call", "tool_call", "model_call"]
    tracer = InMemoryTracer(detail_spans=True)
    await Runner.run(_agent(), "1+2", tracer=tracer)
    tool_span = next(s for s in tracer.spans if s.name == "tool_call")
    assert tool_span.parent is not None and tool_span.parent.name == "turn"
    assert tool_span.parent.parent is not None and tool_span.parent.parent.name == "run"
    assert tool_span.attrs["name"] == "add" and tool_span.exception is None and tool_span.duration_ms >= 0
    model = next(s for s in tracer.spans if s.name == "model_call")
    assert model.attributes["input_tokens"] == 1 and model.attributes["finish_reason"] == "tool_calls"
    assert "output_text" not in model.attributes
