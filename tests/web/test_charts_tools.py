"""show_chart, show_table and ui_result: what the model sees and the errors it can act on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia import Agent, Runner, events
from lovia.exceptions import ToolError, UserError
from lovia.testing import ScriptedProvider, call, text
from lovia.web import show_chart, show_table, ui_result, validate_chart_option
from lovia.web.charts import MAX_OPTION_BYTES
from lovia.web.components import ENVELOPE_KEY
from lovia.web.tables import MAX_TABLE_BYTES, validate_table

BAR = {"title": {"text": "t"}, "series": [{"type": "bar", "data": [1, 2]}]}


async def outputs(tool: Any, args: dict[str, Any]) -> list[events.ToolCallCompleted]:
    agent = Agent(name="a", model=ScriptedProvider([call(tool.name, args), text("ok")]), tools=[tool])
    handle = Runner.stream(agent, "go")
    done = [ev async for ev in handle if isinstance(ev, events.ToolCallCompleted)]
    await handle.result()
    return done


async def test_show_chart_answers_with_a_short_envelope() -> None:
    (done,) = await outputs(show_chart, {"option": BAR})
    assert not done.is_error
    assert json.loads(done.output) == {ENVELOPE_KEY: {"kind": "chart", "from_args": "option"}}


async def test_show_chart_rejects_an_unknown_series_type_with_a_hint() -> None:
    (done,) = await outputs(show_chart, {"option": {"series": [{"type": "custom"}]}})
    assert done.is_error and "custom" in done.output


async def test_show_table_checks_row_width() -> None:
    (done,) = await outputs(show_table, {"columns": ["a", "b"], "rows": [[1, 2], [3]]})
    assert done.is_error and "row 1 has 1 values" in done.output
    (ok,) = await outputs(show_table, {"columns": ["a"], "rows": [[1], ["x"]], "title": "T"})
    assert json.loads(ok.output) == {ENVELOPE_KEY: {"kind": "table", "from_args": True}}


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ({}, "no series"),
        ({"series": []}, "no series"),
        ({"series": ["bar"]}, "not an object"),
        ({"series": [{"type": "map"}]}, "unsupported type 'map'"),
        ({"series": [{"type": "line", "data": [float("nan")]}]}, "not plain JSON"),
        ({"series": [{"type": "line", "data": [object()]}]}, "not plain JSON"),
        ({"series": [{"type": "line", "data": list(range(MAX_OPTION_BYTES))}]}, "byte limit"),
    ],
)
def test_validate_chart_option_errors(option: dict[str, Any], needle: str) -> None:
    with pytest.raises(ToolError) as err:
        validate_chart_option(option)
    assert needle in str(err.value) and err.value.hint


def test_validate_chart_option_accepts_a_single_series_object() -> None:
    validate_chart_option({"series": {"type": "pie", "data": [{"name": "a", "value": 1}]}})


@pytest.mark.parametrize(
    ("columns", "rows", "needle"),
    [
        ([], [], "non-empty list"),
        (["a", 1], [], "non-empty list"),
        (["a"], "x", "list of rows"),
        (["a"], [3], "not a list"),
        (["a"], [[{"x": 1}]], "dict cell"),
        (["a"], [["x" * 100]] * (MAX_TABLE_BYTES // 100), "byte limit"),
    ],
)
def test_validate_table_errors(columns: Any, rows: Any, needle: str) -> None:
    with pytest.raises(ToolError) as err:
        validate_table(columns, rows)
    assert needle in str(err.value) and err.value.hint


def test_ui_result_envelopes() -> None:
    assert json.loads(ui_result("kpis", {"items": [1]}, data="ref1")) == {
        ENVELOPE_KEY: {"kind": "kpis", "props": {"items": [1]}, "data": "ref1"}
    }
    assert json.loads(ui_result("table", from_args="table")) == {ENVELOPE_KEY: {"kind": "table", "from_args": "table"}}
    with pytest.raises(UserError) as both:
        ui_result("table", {}, from_args=True)
    assert both.value.hint
    with pytest.raises(UserError):
        ui_result("table")
    with pytest.raises(UserError):
        ui_result("")
    with pytest.raises(UserError) as bad:
        ui_result("table", {"x": object()})
    assert "not JSON" in str(bad.value)
