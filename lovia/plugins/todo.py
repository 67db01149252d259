"""Todo: a checklist the model keeps for multi-step work, re-shown every turn.

The model writes the whole list with one tool (``todo_write``); each call replaces the list. The
list is per run, but it is never lost: the ``todo_write`` calls are part of the transcript, which
the checkpoint and the session store, so a resumed run, a later run in the same session and a
handoff target all rebuild it from the newest valid call (:func:`todos_from_entries`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..tools import Tool, tool
from ..transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry
from .base import PluginInstance

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = ["Todo", "TodoItem", "TodoList", "TodoStatus", "render_todos", "todos_from_entries"]

TodoStatus = Literal["pending", "in_progress", "completed"]
"""Where a todo stands."""


class TodoItem(BaseModel):
    """One entry of the checklist."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(
        description="Short, one-line imperative label for the task, e.g. 'Run the test suite'. "
        "Keep it glanceable — a few words, not a paragraph."
    )
    status: TodoStatus = Field(default="pending", description="One of: pending, in_progress, completed.")
    active_form: str | None = Field(
        default=None, description="Present-tense form shown while in_progress, e.g. 'Running the test suite'."
    )


_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def render_todos(items: list[TodoItem]) -> str:
    """The list as plain text lines (``[x] done``, ``[~] doing``, ``[ ] to do``)."""
    if not items:
        return "(the todo list is empty)"
    lines = []
    for item in items:
        label = item.active_form if item.status == "in_progress" and item.active_form else item.content
        lines.append(f"{_MARK[item.status]} {label}")
    return "\n".join(lines)


class TodoList:
    """The run's list: replaced whole by each write."""

    def __init__(self) -> None:
        self.items: list[TodoItem] = []

    def replace(self, inputs: list[TodoItem]) -> list[TodoItem]:
        """Take a new full list; items after the first ``in_progress`` one are demoted to pending."""
        seen_active = False
        cleaned: list[TodoItem] = []
        for item in inputs:
            if item.status == "in_progress":
                if seen_active:
                    item = item.model_copy(update={"status": "pending"})
                seen_active = True
            cleaned.append(item)
        self.items = cleaned
        return list(cleaned)

    def rehydrate_from(self, entries: list[TranscriptEntry], *, tool_name: str = "todo_write") -> None:
        """Rebuild from the newest ``tool_name`` call in ``entries`` whose arguments parse and validate.

        Later calls with malformed arguments are skipped, and so is a call whose stored result is
        an error; a call without a result counts. Without any such call the list is left as it is.
        """
        failed = {e.call_id for e in entries if isinstance(e, ToolResultEntry) and e.is_error}
        for entry in reversed(entries):
            if isinstance(entry, ToolCallEntry) and entry.name == tool_name and entry.call_id not in failed:
                items = _parse_call(entry.arguments)
                if items is not None:
                    self.replace(items)
                    return


def _parse_call(arguments: str) -> list[TodoItem] | None:
    try:
        raw = json.loads(arguments)
        return [TodoItem.model_validate(item) for item in raw["todos"]]
    except (ValueError, TypeError, KeyError, ValidationError):
        return None


def todos_from_entries(entries: list[TranscriptEntry], *, tool_name: str = "todo_write") -> list[TodoItem]:
    """The list as the newest successful ``tool_name`` call in a transcript left it.

    A call counts when its arguments parse and its result is not an error (a call without a
    stored result, such as one cut off by a crash, does not count).
    """
    waiting: dict[str, ToolCallEntry] = {}
    latest: list[TodoItem] | None = None
    for entry in entries:
        if isinstance(entry, ToolCallEntry) and entry.name == tool_name:
            waiting[entry.call_id] = entry
        elif isinstance(entry, ToolResultEntry) and entry.call_id in waiting:
            made = waiting.pop(entry.call_id)
            items = None if entry.is_error else _parse_call(made.arguments)
            if items is not None:
                latest = items
    return TodoList().replace(latest) if latest is not None else []


_INSTRUCTIONS = (
    "For work with three or more distinct steps, keep a todo list with `{tool}`: write the whole "
    "list each time, keep exactly one item in_progress while you work, and mark items completed as "
    "soon as they are done. Skip the list for simple one-step requests."
)


@dataclass
class Todo:
    """The plugin: a ``todo_write`` tool plus a per-turn reminder of the current list."""

    tool_name: str = "todo_write"
    inject: bool = True
    instructions: str | None = _INSTRUCTIONS
    name: str = "todos"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Build the run's list (rebuilt from the transcript on first use) and its tool."""
        store = TodoList()
        hydrated = False

        def current(live: RunContext[Any]) -> TodoList:
            nonlocal hydrated
            if not hydrated:  # history and resumed entries are in place by the first turn
                # Only calls whose result was stored count here (one cut off by a crash runs again).
                store.items = todos_from_entries(list(live.entries), tool_name=self.tool_name)
                hydrated = True
            return store

        if ctx.entries:  # a handoff target: the transcript is already there
            current(ctx)

        @tool(name=self.tool_name, result_renderer=lambda items, _ctx: _confirm(items))
        def write(todos: list[TodoItem]) -> list[TodoItem]:
            """Replace the todo list with this complete list (every item, each with its status)."""
            nonlocal hydrated
            hydrated = True
            return store.replace(todos)

        def remind(live: RunContext[Any]) -> list[TranscriptEntry] | None:
            items = current(live).items
            if not items:
                return None
            body = f"Your todo list (update it with `{self.tool_name}`):\n{render_todos(items)}"
            return [InputEntry(role="user", content=f"<system-reminder>\n{body}\n</system-reminder>")]

        tools: list[Tool[Any]] = [write]
        text = self.instructions.replace("{tool}", self.tool_name) if self.instructions else None
        return PluginInstance(tools=tools, instructions=text, view_injectors=[remind] if self.inject else [])


def _confirm(items: list[TodoItem]) -> str:
    done = sum(1 for i in items if i.status == "completed")
    return f"Todo list updated ({done}/{len(items)} done):\n{render_todos(items)}"
