"""Where the web app keeps its chats when given no ``--db`` / ``db_path``: ``./.lovia/<agent>.db``.

The file is named after the served (default) agent through :func:`agent_file_stem`, a slug that
stays one plain file name inside ``./.lovia/``. A file an earlier release of ours opened instead
(``./.lovia/lovia.db``, or the agent's file under the earlier naming) is kept in use while the new
file does not exist, with one log line saying so.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata

__all__ = ["DEFAULT_DB", "agent_file_stem", "default_db_path"]

DEFAULT_DB = "./.lovia/lovia.db"
"""The file of the built-in assistant, and of every app before files were named after the agent."""

_FOLDER = "./.lovia"
_MAX_STEM = 64
_logger = logging.getLogger("lovia.web")
_told: set[str] = set()


def agent_file_stem(agent_name: str) -> str:
    """The agent's file name without ``.db``: a safe slug, the same on every system.

    Letters of any script (with their combining marks), digits, ``_`` and ``-`` are kept (after
    NFKC normalization, so full-width forms become plain ones); every run of anything else (dots, spaces, slashes,
    repeated separators) becomes one ``-``; leading and trailing ``-``/``_`` go, and the result is
    cut to 64 characters. A name left with nothing is ``agent``. ``"my.bot"`` -> ``my-bot``,
    ``"a  //  b"`` -> ``a-b``, ``"助手"`` -> ``助手``, ``"..."`` -> ``agent``.
    """
    text = unicodedata.normalize("NFKC", agent_name)
    kept = "".join(ch if ch in "_-" or unicodedata.category(ch)[0] in "LMN" else " " for ch in text)
    stem = re.sub(r"[\s-]+", "-", kept.strip()).strip("-_")[:_MAX_STEM].rstrip("-_")
    return stem or "agent"


def _earlier_stem(agent_name: str) -> str:
    """How our releases before this naming spelled the file (kept readable, never created)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", agent_name).strip("._") or "lovia"


def default_db_path(agent_name: str) -> str:
    """``./.lovia/<agent_file_stem(agent)>.db``, or an earlier release's file while that one does not exist.

    The name holds no separator and does not start with a dot, so the file is always directly
    inside ``./.lovia/``.
    """
    stem = agent_file_stem(agent_name)
    if (
        os.sep in stem or (os.altsep and os.altsep in stem) or stem.startswith(".")
    ):  # pragma: no cover - by construction
        raise ValueError(f"agent name {agent_name!r} gives an unsafe file name {stem!r}")
    path = f"{_FOLDER}/{stem}.db"
    if os.path.exists(path):
        return path
    for earlier in (f"{_FOLDER}/{_earlier_stem(agent_name)}.db", DEFAULT_DB):
        if earlier != path and os.path.exists(earlier):
            where = os.path.abspath(earlier)
            if where not in _told:  # once per file and process
                _told.add(where)
                _logger.info(
                    "keeping the chats in %s (%s is where a new app of agent %r would keep them)",
                    earlier,
                    path,
                    agent_name,
                )
            return earlier
    return path
