"""The composer's message and attachments as the run's input.

An attachment names a file on the server (``path``), its type (``mime``), whether it is an
``image`` or a ``file``, and optionally the name the user saw. Images reach the model as
:class:`~lovia.parts.ImagePart`, other files as :class:`~lovia.parts.FilePart`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..messages import Message, user
from ..parts import ContentPart, FilePart, ImagePart, TextPart
from ..providers.base import supports_vision
from .errors import WebError
from .ids import PathOutside, path_inside
from .media import model_image_mime

__all__ = ["build_user_input"]


def _confined(path: str, root: str | os.PathLike[str] | None) -> str:
    """``path`` resolved inside ``root`` (relative paths are taken from ``root``); 403 when it leaves it."""
    if root is None or not path:
        return path
    base = os.path.realpath(root)
    try:
        return str(path_inside(Path(base), os.path.relpath(os.path.join(base, path), base)))
    except (PathOutside, ValueError):
        raise WebError(
            403,
            "path_denied",
            "the attachment lies outside the attachments folder",
            hint="attach a file from that folder",
        ) from None


def _part(item: Any, root: str | os.PathLike[str] | None = None) -> ContentPart:
    path = _confined(str(getattr(item, "path", "") or ""), root)
    name = getattr(item, "name", None) or os.path.basename(path)
    if not path or not os.path.isfile(path):
        raise WebError(404, "file_not_found", f"the attachment {name!r} is gone", hint="upload the file again")
    if getattr(item, "kind", None) == "image":
        mime = model_image_mime(name) or model_image_mime(path) or str(getattr(item, "mime", "") or "")
        return ImagePart.from_path(path, mime_type=mime)
    return FilePart.from_path(path, mime_type=getattr(item, "mime", None), filename=name)


def build_user_input(req: Any, agent: Agent[Any], *, root: str | os.PathLike[str] | None = None) -> str | list[Message]:
    """``req.message`` alone when ``req.attachments`` is empty, else one user message of parts.

    With ``root``, every attachment's path must lie inside that folder once resolved (symlinks
    followed; a relative path is taken from ``root``): pass it whenever the paths come from a client.

    Raises:
        WebError: an image for a model that cannot read images (422), a path outside ``root``
            (403 ``path_denied``), or a missing file (404).
    """
    message = str(getattr(req, "message", "") or "")
    items = list(getattr(req, "attachments", None) or [])
    if not items:
        return message
    if any(getattr(item, "kind", None) == "image" for item in items) and not supports_vision(agent.model):
        raise WebError(
            422,
            "invalid_request",
            "the model of this chat cannot read images",
            hint="switch the chat to a vision-capable model, or attach the image as a file",
        )
    parts: list[ContentPart] = [TextPart(message)] if message else []
    parts.extend(_part(item, root) for item in items)
    return [user(parts)]
