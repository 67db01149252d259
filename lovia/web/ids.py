"""The one rule for chat ids, and the one check that a path built from input stays in its folder.

A chat id names a folder on disk (the chat's uploads), so the web app accepts only ids that are
a single, harmless path component: 1 to :data:`CHAT_ID_MAX_CHARS` characters out of ASCII
letters, digits, ``_``, ``-``, ``.`` and ``@``, starting with a letter or a digit (so never ``.``,
``..`` or a hidden name). Every id the app makes itself fits: ``chat_<hex>``, a bare uuid hex,
``spawned-1``, ``task-1``.

Routes check the ids they receive with :func:`check_chat_id` (a 422 on violation), the chat
stores check the ids they create with it, and :func:`path_inside` proves a path built from an
id or a file name lies inside its folder before anything is written or deleted there, which
also covers ids stored before this rule existed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from ..exceptions import UserError

__all__ = [
    "CHAT_ID_MAX_CHARS",
    "CHAT_ID_PATTERN",
    "CHAT_ID_RULE",
    "ChatId",
    "InvalidChatId",
    "PathOutside",
    "check_chat_id",
    "chat_id_error",
    "path_inside",
    "unlink_inside",
]

CHAT_ID_MAX_CHARS = 128
"""The longest chat id (characters)."""

CHAT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$"
"""What a chat id may look like (also at most :data:`CHAT_ID_MAX_CHARS` long)."""

_CHAT_ID = re.compile(CHAT_ID_PATTERN)
CHAT_ID_RULE = f"1 to {CHAT_ID_MAX_CHARS} of A-Z a-z 0-9 _ - . @ starting with a letter or digit"


class InvalidChatId(UserError, ValueError):
    """A chat id outside the rule of :func:`check_chat_id`."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem, hint=f"use an id of {CHAT_ID_RULE}, or leave it out to get a fresh one")


def chat_id_error(value: object) -> str | None:
    """Why ``value`` is not a valid chat id, or ``None`` when it is one."""
    if not isinstance(value, str):
        return "a chat id is a string"
    if not value:
        return "the chat id is empty"
    if len(value) > CHAT_ID_MAX_CHARS:
        return f"the chat id is {len(value)} characters long; at most {CHAT_ID_MAX_CHARS} are allowed"
    if _CHAT_ID.fullmatch(value) is None:
        return f"the chat id may hold only {CHAT_ID_RULE}"
    return None


def check_chat_id(value: str) -> str:
    """``value`` when it is a valid chat id.

    Raises:
        UserError: it is not (a :class:`ValueError` too, so a pydantic model reports it as 422).
    """
    problem = chat_id_error(value)
    if problem is not None:
        raise InvalidChatId(problem)
    return value


ChatId = Annotated[str, AfterValidator(check_chat_id)]
"""A request field holding a chat id (422 when it breaks the rule)."""


class PathOutside(UserError):
    """A path built from input would leave the folder it belongs in."""


def path_inside(base: Path, *parts: str) -> Path:
    """``base / parts...`` resolved, after proving it lies strictly inside ``base`` (also resolved).

    Symlinks are followed, so a link pointing out of ``base`` is refused as well.

    Raises:
        PathOutside: a part is empty, absolute, holds a NUL, or the result is ``base`` itself or outside it.
    """
    root = Path(os.path.realpath(base))
    for part in parts:
        if not part or "\x00" in part or os.path.isabs(part):
            raise PathOutside(f"refused the path part {part!r}", hint="name the file by a plain, relative name")
    target = Path(os.path.realpath(root.joinpath(*parts)))
    if target == root or not target.is_relative_to(root):
        raise PathOutside(
            f"refused a path outside {root}: {os.path.join(*parts)!r}",
            hint="chat ids and file names must stay inside their folder",
        )
    return target


def unlink_inside(base: Path, path: str) -> bool:
    """Delete the file ``path`` when it lies inside ``base``; whether a file was deleted.

    A path outside ``base`` (a record from before the chat id rule) or a file already gone is left alone.
    """
    try:
        target = path_inside(base, os.path.relpath(path, base))
    except (PathOutside, ValueError):
        return False
    try:
        os.unlink(target)
    except FileNotFoundError:
        return False
    return True
