"""A scripted agent with a real workspace that starts, reads and kills background processes on command.

Each user message is one instruction: ``start <command>`` (``shell`` with ``background=true``),
``read <pid>`` (``read_process_output``), ``kill <pid>`` (``kill_process``) or
``edit <path>`` (``edit_file``, replacing :data:`EDIT_OLD` by :data:`EDIT_NEW`). The reply after
the tool names it and quotes the tool's output, so a test can read what the model got.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.workspace import Workspace

EDIT_OLD = "def greet():\n    return 'hello'\n"
EDIT_NEW = "def greet(name):\n    return f'hello {name}'\n"


def _last_instruction(entries: list[TranscriptEntry]) -> tuple[str, int]:
    """The last user message (not a transient ``<system-reminder>``) and the tool results after it."""
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if isinstance(e, InputEntry) and e.role == "user" and not e.text.startswith("<system-reminder>"):
            return e.text, sum(1 for x in entries[i:] if isinstance(x, ToolResultEntry))
    return "", 0


def _script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    message, results = _last_instruction(entries)
    verb, _, arg = message.partition(" ")
    if results:
        last = next(e for e in reversed(entries) if isinstance(e, ToolResultEntry))
        return text(f"{verb} done: {last.output}")
    n = sum(1 for e in entries if isinstance(e, ToolResultEntry))
    if verb == "start":
        return call("shell", {"command": arg, "background": True}, call_id=f"call_start_{n}")
    if verb == "read":
        return call("read_process_output", {"process_id": arg}, call_id=f"call_read_{n}")
    if verb == "kill":
        return call("kill_process", {"process_id": arg}, call_id=f"call_kill_{n}")
    if verb == "edit":
        return call("edit_file", {"path": arg, "old": EDIT_OLD, "new": EDIT_NEW}, call_id=f"call_edit_{n}")
    if verb == "write":
        return call("write_file", {"path": arg, "content": "alpha\nbeta\n"}, call_id=f"call_write_{n}")
    return text("ok")


def process_agent(root: Path) -> Agent[Any]:
    """The agent, working in ``root`` in trusted mode (no approvals for its commands)."""
    return Agent(name="procs", model=ScriptedProvider(_script), workspace=Workspace.local(str(root), mode="trusted"))
