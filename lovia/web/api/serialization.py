"""The API's message projection of a chat (``lovia.web.api.serialization``); see :mod:`lovia.web.serialization`."""

from __future__ import annotations

from ..serialization import (
    Run,
    Runs,
    drop_system_entries,
    message_to_json_dict,
    parse_ref,
    segment_timing,
    segments_runs,
    segments_to_out,
    tool_image_stubs,
    tool_result_flags,
    user_turn_refs,
    view_messages,
)

__all__ = [
    "Run",
    "Runs",
    "drop_system_entries",
    "message_to_json_dict",
    "parse_ref",
    "segment_timing",
    "segments_runs",
    "segments_to_out",
    "tool_image_stubs",
    "tool_result_flags",
    "user_turn_refs",
    "view_messages",
]
