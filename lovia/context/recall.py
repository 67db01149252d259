"""``recall_tool_result``: give the model back a tool output that compaction took out of its view.

Compaction policies add it through their ``tools()``; the loop adds policy tools last, so an
explicit tool of the same name wins. The tool never re-runs the original tool: it reads the
result store, then the live transcript.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..exceptions import InvalidToolArguments
from ..run_context import RunContext
from ..tools._tool import Tool
from ..transcript import ToolResultEntry, TranscriptEntry
from .render import RECALL_TOOL_NAME
from .stores import ResultStore, content_key, is_valid_key

__all__ = ["find_tool_result", "make_recall_tool", "recall_tool_result"]

_DESCRIPTION = (
    "Read again the full output of an earlier tool call that was cleared or archived to save context. "
    "Pass the ref shown in the placeholder (a call id or a content digest). It returns stored text; "
    "it never runs the original tool again."
)


async def find_tool_result(ref: str, entries: Sequence[TranscriptEntry], store: ResultStore | None) -> str | None:
    """Look ``ref`` up: result store, then the transcript by ``call_id``, then by content digest."""
    ref = ref.strip()
    if store is not None and is_valid_key(ref):
        try:
            found = await store.get(ref)
        except asyncio.CancelledError:
            raise
        except Exception:
            found = None  # an unreadable archive falls back to the transcript
        if found is not None:
            return found
    results = [e for e in entries if isinstance(e, ToolResultEntry)]
    for entry in results:
        if entry.call_id == ref:
            return entry.output
    if len(ref) == 64:
        for entry in results:
            if content_key(entry.output) == ref:
                return entry.output
    return None


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"type": "string", "description": "The ref shown in the placeholder: a call id or a content digest."},
    },
    "required": ["ref"],
}


def recall_tool_result(store: ResultStore | None) -> Tool[Any]:
    """Build the ``recall_tool_result`` tool over ``store`` (may be ``None``: transcript only).

    The schema is written out by hand: every agent with a compacting policy gets this tool, so
    building it must cost next to nothing.
    """

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        ref = args.get("ref")
        if not isinstance(ref, str) or not ref:
            raise InvalidToolArguments("'ref' must be a non-empty string", hint="copy the ref from the placeholder")
        found = await find_tool_result(ref, ctx.entries, store)
        if found is None:
            return (
                f"No stored tool output found for ref {ref!r}. "
                "Use the exact ref from the placeholder, or call the original tool again if needed."
            )
        return found

    return Tool(name=RECALL_TOOL_NAME, description=_DESCRIPTION, parameters=_PARAMETERS, invoke=invoke)


make_recall_tool = recall_tool_result
"""The same builder under its earlier name."""
