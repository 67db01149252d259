"""Charts, tables and tool images in the chat page (offline, scripted model).

Run it: ``python examples/web_charts.py`` prints what the model sees for each call; with
``--serve`` it opens the same agent in ``lovia web`` (say "chart", "table" or "image").

``show_chart`` and ``show_table`` answer with a short ``lovia_ui`` envelope that points the
page at the call's own arguments, so the numbers are not echoed back to the model. A tool of
your own returns ``ui_result(kind, props)`` with real data, and one declared with
``returns_images=True`` can return an ``ImagePart`` that the page shows in the tool's card.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import sys
import zlib
from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.parts import ImagePart
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import show_chart, show_table, ui_result

SALES = {"title": {"text": "Units sold"}, "xAxis": {"type": "category", "data": ["Jan", "Feb", "Mar"]},
         "yAxis": {"type": "value"}, "series": [{"type": "bar", "data": [120, 200, 150]}]}  # fmt: skip


def square_png(size: int = 16, rgb: tuple[int, int, int] = (220, 60, 40)) -> bytes:
    """A solid-colour PNG, built by hand so the example needs no imaging library."""
    row = b"\x00" + bytes(rgb) * size
    raw = zlib.compress(row * size)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


@tool(returns_images=True)
def swatch(size: int = 16) -> ImagePart:
    """Render a colour swatch as a PNG image."""
    return ImagePart(data=base64.b64encode(square_png(size)).decode(), mime_type="image/png")


@tool
def top_products(n: int = 3) -> str:
    """Best sellers from the (here: built-in) data, shown to the user as a table."""
    rows = [["apples", 30, 1.5], ["pears", 12, 2.25], ["plums", 44, 0.8]][:n]
    return ui_result("table", {"title": "Top products", "columns": ["name", "units", "price"], "rows": rows})


def _last_user(entries: list[TranscriptEntry]) -> tuple[str, int]:
    said, results = "", 0
    for entry in entries:
        if isinstance(entry, InputEntry) and entry.role == "user":
            said, results = str(entry.content), 0
        elif isinstance(entry, ToolResultEntry):
            results += 1
    return said, results


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said, results = _last_user(entries)
    if results:
        return text("There it is.")
    word = said.split()[0].lower() if said.split() else ""
    if word == "chart":
        return call("show_chart", {"option": SALES})
    if word == "table":
        return call("top_products", {"n": 3})
    if word == "image":
        return call("swatch", {"size": 24})
    return text('Say "chart", "table" or "image".')


def build_agent() -> Agent[Any]:
    """The scripted agent: one tool call per request word."""
    return Agent(name="charts", model=ScriptedProvider(script), tools=[show_chart, show_table, top_products, swatch])


async def main() -> None:
    agent = build_agent()
    for word in ("chart", "table", "image"):
        handle = Runner.stream(agent, word)
        async for ev in handle:
            if isinstance(ev, events.ToolCallCompleted):
                print(f"{ev.call.name}: the model sees {ev.output[:100]}")
        await handle.result()


if __name__ == "__main__":
    if "--serve" in sys.argv:
        from lovia.web import serve

        serve(build_agent())
    else:
        asyncio.run(main())
