"""Todo: the checklist tool, its per-turn reminder, and a list that survives crashes and new runs."""

from __future__ import annotations

import pytest

from lovia import Agent, Runner, events
from lovia.plugins.todo import Todo, TodoItem, TodoList, render_todos, todos_from_entries
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.testing.crash import Boundary, crash_test
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

FACTORY = "tests.plugins.todo_scenarios:todo_scenario"


def reminders(request) -> list[str]:
    return [e.content for e in request.entries if isinstance(e, InputEntry) and "<system-reminder>" in str(e.content)]


async def open_sqlite(path: str):
    return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)


@pytest.mark.parametrize(
    ("boundary", "tool", "occurrence"),
    [(Boundary.AFTER_TOOL_SAVE, None, 1), (Boundary.IN_TOOL, "step", 1), (Boundary.AFTER_MODEL_SAVE, None, 4)],
    ids=lambda v: getattr(v, "value", v),
)
async def test_a_sigkilled_run_resumes_with_exactly_the_list_it_would_have_had(tmp_path, boundary, tool, occurrence):
    report = await crash_test(
        FACTORY,
        store=str(tmp_path / "crash.db"),
        reference_store=str(tmp_path / "reference.db"),
        run_id="plan-1",
        boundary=boundary,
        tool=tool,
        occurrence=occurrence,
        workdir=tmp_path,
        open_stores=open_sqlite,
    )
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    assert "[x] draft\n[x] review\n[x] ship" in report.resumed.result["output"]
    ours = await SQLiteSession(str(tmp_path / "crash.db")).load("crash-session")
    theirs = await SQLiteSession(str(tmp_path / "reference.db")).load("crash-session")
    assert todos_from_entries(ours) == todos_from_entries(theirs)
    writes = [e.call_id for e in ours if isinstance(e, ToolCallEntry) and e.name == "todo_write"]
    assert writes == ["w0", "w1", "w2", "w3"]  # nothing duplicated


async def test_the_list_carries_into_the_next_run_of_the_session(tmp_path) -> None:
    session = SQLiteSession(str(tmp_path / "s.db"))
    first = ScriptedProvider(
        [call("todo_write", {"todos": [{"content": "write tests", "status": "in_progress"}]}), text("ok")]
    )
    await Runner.run(Agent(name="a", model=first, plugins=[Todo()]), "plan", session=session, session_id="s")
    second = ScriptedProvider([text("continuing")])
    await Runner.run(Agent(name="a", model=second, plugins=[Todo()]), "go on", session=session, session_id="s")
    assert reminders(second.requests[0]) == [
        "<system-reminder>\nYour todo list (update it with `todo_write`):\n[~] write tests\n</system-reminder>"
    ]


async def test_reminders_are_never_persisted_and_follow_each_write() -> None:
    model = ScriptedProvider(
        [
            call("todo_write", {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b"}]}),
            call(
                "todo_write",
                {
                    "todos": [
                        {"content": "a", "status": "completed"},
                        {"content": "b", "status": "in_progress", "active_form": "Doing b"},
                    ]
                },
            ),
            text("done"),
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, plugins=[Todo()]), "go")
    assert reminders(model.requests[0]) == []
    assert "[~] a\n[ ] b" in reminders(model.requests[1])[0]
    assert "[x] a\n[~] Doing b" in reminders(model.requests[2])[0]
    assert len(reminders(model.requests[2])) == 1  # regenerated, not accumulated
    assert not any("<system-reminder>" in str(getattr(e, "content", "")) for e in result.entries)


async def test_events_carry_the_structured_list_and_a_second_in_progress_is_demoted() -> None:
    model = ScriptedProvider(
        [
            call(
                "todo_write",
                {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]},
            ),
            text("ok"),
        ]
    )
    handle = Runner.stream(Agent(name="a", model=model, plugins=[Todo()]), "go")
    results = [
        ev.result async for ev in handle if isinstance(ev, events.ToolCallCompleted) and ev.call.name == "todo_write"
    ]
    await handle.result()
    assert results == [[TodoItem(content="a", status="in_progress"), TodoItem(content="b", status="pending")]]


async def test_a_bad_write_is_an_error_for_the_model_and_keeps_the_old_list() -> None:
    model = ScriptedProvider(
        [
            call("todo_write", {"todos": [{"content": "keep me"}]}),
            call("todo_write", {"todos": [{"content": "x", "status": "sideways"}]}),
            text("ok"),
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, plugins=[Todo()]), "go")
    bad = [e for e in result.entries if isinstance(e, ToolResultEntry)][1]
    assert bad.is_error
    assert "[ ] keep me" in reminders(model.requests[2])[0]
    assert todos_from_entries(result.entries) == [TodoItem(content="keep me")]


async def test_configuration_inject_off_custom_name_and_no_instructions() -> None:
    model = ScriptedProvider([call("plan", {"todos": [{"content": "a"}]}), text("ok")])
    agent = Agent(name="a", model=model, plugins=[Todo(tool_name="plan", inject=False, instructions=None)])
    result = await Runner.run(agent, "go")
    assert reminders(model.requests[1]) == []
    assert "plan" in {t.name for t in model.requests[0].tools}
    assert "todo" not in str(model.requests[0].entries[0].content).lower()
    assert todos_from_entries(result.entries, tool_name="plan") == [TodoItem(content="a")]


def test_list_helpers() -> None:
    store = TodoList()
    out = store.replace([TodoItem(content="a", status="completed"), TodoItem(content="b", status="in_progress")])
    assert render_todos(out) == "[x] a\n[~] b" and store.items == out
    assert render_todos([]) == "(the todo list is empty)"
    cut = [ToolCallEntry(call_id="c1", name="todo_write", arguments='{"todos": [{"content": "z"}]}')]
    assert todos_from_entries(cut) == []  # a call without a stored result does not count
    store.rehydrate_from(cut, tool_name="todo_write")
    assert store.items == [TodoItem(content="z")]  # the list method takes the newest valid call itself


def test_rehydrate_from_takes_the_newest_call_that_validates() -> None:
    entries = [
        ToolCallEntry(call_id="c1", name="todo_write", arguments='{"todos": [{"content": "plan"}]}'),
        ToolResultEntry(call_id="c1", output="ok"),
        ToolCallEntry(
            call_id="c2", name="todo_write", arguments='{"todos": [{"content": "ship", "status": "in_progress"}]}'
        ),
        ToolCallEntry(call_id="c3", name="todo_write", arguments='{"todos": [{"content": "x", "status": "maybe"}]}'),
        ToolCallEntry(call_id="c4", name="todo_write", arguments="{not json"),
        ToolCallEntry(call_id="c5", name="other_tool", arguments='{"todos": [{"content": "not mine"}]}'),
    ]
    store = TodoList()
    store.rehydrate_from(entries, tool_name="todo_write")
    assert store.items == [TodoItem(content="ship", status="in_progress")]
    store.rehydrate_from(entries)  # tool_name defaults to "todo_write"
    assert [i.content for i in store.items] == ["ship"]
