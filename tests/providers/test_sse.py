from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lovia.providers._sse import SSEDecoder, SSEEvent

from .servers import split_at

STREAM = (
    "event: message_start\r\n"
    'data: {"t": "h\u00e9llo \u2603 \U0001f600"}\r\n'
    "\r\n"
    ": keep-alive comment\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "\n"
    "data:no-space\r"
    "\r"
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SSEEvent(data='{"t": "h\u00e9llo \u2603 \U0001f600"}', event="message_start"),
    SSEEvent(data="line one\nline two", id="7"),
    SSEEvent(data="no-space", id="7"),
    SSEEvent(data="[DONE]", id="7"),
]


def decode(pieces: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    out.extend(decoder.close())
    return out


def test_whole_stream() -> None:
    assert decode([STREAM]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_every_single_split_position(cut: int) -> None:
    # Covers cuts inside multi-byte UTF-8 characters, inside "data:", and between \r and \n.
    assert decode([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_one_byte_at_a_time() -> None:
    assert decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_crlf_split_does_not_create_an_extra_blank_line() -> None:
    # If "\r" and "\n" were treated as two line ends, the first event would be dispatched early
    # with only "a" and "b" would become a second event.
    pieces = [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]
    assert decode(pieces) == [SSEEvent(data="a\nb")]


def test_bom_is_stripped_and_trailing_event_flushed_at_close() -> None:
    assert decode([b"\xef\xbb", b"\xbfdata: x\n", b"data: y"]) == [SSEEvent(data="x\ny")]


def test_event_without_data_is_not_dispatched_and_resets_type() -> None:
    assert decode([b"event: ping\n\ndata: z\n\n"]) == [SSEEvent(data="z")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode([b"data: \xff\n\n"]) == [SSEEvent(data="\ufffd")]


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(["data: é€ x", 'data: {"a": 1}', "event: e", ": ping", "", "id: 7", "data:"]), max_size=30
    ),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=12),
)
def test_any_chunking_of_any_line_ending_gives_the_same_events(lines, ending, cuts) -> None:
    """The region splitter agrees with a whole-buffer parse for every cut (CR, LF, CRLF)."""
    body = ending.join(lines).encode() + ending.encode() * 2
    expected = _reference(body)
    decoder = SSEDecoder()
    got = []
    for piece in split_at(body, cuts):
        got += decoder.feed(piece)
    got += decoder.close()
    assert got == expected


def _reference(body: bytes) -> list[SSEEvent]:
    """A deliberately naive SSE parser over the whole body (the spec's steps, nothing clever)."""
    events, data, kind, last_id = [], [], None, None
    for line in re.split("\r\n|\r|\n", body.decode("utf-8", errors="replace")):
        if line == "":
            if data:
                events.append(SSEEvent(data="\n".join(data), event=kind or "message", id=last_id))
            data, kind = [], None
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                kind = value
            elif name == "id":
                last_id = value
    return events
