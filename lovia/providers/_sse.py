"""Server-sent events framing: bytes in, complete events out.

Internal; shared by the HTTP provider adapters. It knows nothing about vendors or JSON. Bytes are
buffered until a whole line is present and only then decoded, so a chunk boundary may fall
anywhere: inside a multi-byte UTF-8 character, inside a ``data:`` field name, or between the
``\\r`` and ``\\n`` of a CRLF line ending. Line endings may be ``\\n``, ``\\r\\n`` or ``\\r``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEDecoder", "SSEEvent", "iter_sse"]

_BOM = "\ufeff"
_LINE_BREAK = re.compile("\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event."""

    data: str
    """The ``data:`` lines joined with ``\\n``."""
    event: str = "message"
    """The ``event:`` field, ``"message"`` when absent."""
    id: str | None = None
    """The last ``id:`` field seen, if any."""


class SSEDecoder:
    """Incremental SSE parser: call :meth:`feed` per chunk and :meth:`close` at end of stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._event: str | None = None
        self._last_id: str | None = None
        self._started = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add bytes; return the events they complete (possibly none)."""
        self._buffer.extend(chunk)
        events: list[SSEEvent] = []
        for line in self._take_lines(final=False):
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: flush a trailing line and a pending event with no blank line after it."""
        events: list[SSEEvent] = []
        lines = self._take_lines(final=True)
        if self._buffer:
            lines.append(self._decode(bytes(self._buffer)))
            self._buffer.clear()
        for line in [*lines, ""]:
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def _take_lines(self, *, final: bool) -> list[str]:
        # Cut the buffer after its last line terminator and split that region in one pass (C
        # speed, not a Python loop per byte). A trailing \r may be half of a \r\n split across
        # chunks, so it is only taken once more bytes (or the end of the stream) show what it is.
        buf = self._buffer
        end = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
        if end >= 0 and end == len(buf) - 1 and buf[end] == 0x0D and not final:
            end = max(buf.rfind(b"\n", 0, end), buf.rfind(b"\r", 0, end))
        if end < 0:
            return []
        region = bytes(buf[: end + 1])
        del buf[: end + 1]
        if region.endswith(b"\r") and buf[:1] == b"\n":
            del buf[:1]  # the \n of a \r\n whose halves sit on both sides of the cut
        text = self._decode(region)
        return _LINE_BREAK.split(text)[:-1]

    def _decode(self, raw: bytes) -> str:
        text = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        return text

    def _process_line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = None
            return None
        event = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._last_id)
        self._data = []
        self._event = None
        return event


async def iter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[SSEEvent]:
    """Decode an async byte stream into events; a pending event is flushed when the stream ends."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
