"""``lovia web --check`` for the configured model, and the summary ``lovia web`` prints at start."""

from __future__ import annotations

import sys
from typing import TextIO

import httpx

from .probe import ValidationOutcome, known_context_window, unlisted_model_note, validate_connection
from .schema import Connection
from .storage import CONFIG_HINT

__all__ = ["format_app_summary", "format_summary", "format_unconfigured_summary", "mask_key", "run_check"]


def mask_key(key: str | None) -> str:
    """A hint of a key safe to show: its last four characters (``"…f00d"``), ``""`` for none.

    Keys of eight characters or fewer show nothing but ``"…"``: four characters of a short key
    would give too much of it away.
    """
    if not key:
        return ""
    return f"…{key[-4:]}" if len(key) > 8 else "…"


def _describe(conn: Connection) -> str:
    key = f"API key {mask_key(conn.api_key)}" if conn.api_key else "no API key"
    return f"{conn.model} at {conn.root}, {key}"


def run_check(
    conn: Connection, *, version: str, out: TextIO | None = None, transport: httpx.BaseTransport | None = None
) -> int:
    """Probe ``conn`` once and print the verdict; the exit status (0: usable, 1: not)."""
    stream = out or sys.stdout
    stream.write(f"lovia {version}\n")
    gaps = conn.missing()
    if gaps:
        stream.write(f"model: not configured (missing: {', '.join(gaps)})\n  hint: {CONFIG_HINT}\n")
        return 1
    outcome, detail = validate_connection(conn, transport=transport)
    stream.write(f"model: {_describe(conn)}\n")
    stream.write(f"check: {outcome.value}: {detail}\n")
    window = known_context_window(conn)
    if window is not None:
        source = "reported by the endpoint" if conn.window_from_endpoint else "configured or known"
        stream.write(f"context window: {window} tokens ({source})\n")
    note = unlisted_model_note(conn)
    if note:
        stream.write(f"note: {note}\n")
    if outcome is ValidationOutcome.AUTH_FAILED:
        stream.write("  hint: check the API key in Settings → Models\n")
    elif outcome is ValidationOutcome.UNREACHABLE:
        stream.write("  hint: check that the server is up and the base URL is right\n")
    return 0 if outcome in (ValidationOutcome.OK, ValidationOutcome.UNVERIFIABLE) else 1


def format_summary(
    conn: Connection, *, version: str, url: str, config_desc: str, workspace_desc: str, db_desc: str
) -> str:
    """The start-up summary of the default agent on a configured model."""
    return "\n".join(
        [
            f"lovia {version} serving {url}",
            f"  model:     {_describe(conn)}",
            f"  config:    {config_desc}",
            f"  workspace: {workspace_desc}",
            f"  store:     {db_desc}",
        ]
    )


def format_unconfigured_summary(*, version: str, url: str, db_desc: str) -> str:
    """The start-up summary when no model is configured yet."""
    return "\n".join(
        [
            f"lovia {version} serving {url}",
            "  model:     not configured (the offline demo answers until one is)",
            f"  configure: {CONFIG_HINT}",
            f"  store:     {db_desc}",
        ]
    )


def format_app_summary(*, version: str, app_target: str, db_desc: str, url: str) -> str:
    """The start-up summary when ``--app`` serves agents of your own."""
    return "\n".join([f"lovia {version} serving {url}", f"  app:       {app_target}", f"  store:     {db_desc}"])
