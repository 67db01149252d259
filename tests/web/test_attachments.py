"""``build_user_input``: the composer's attachments as one user message of parts."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.testing import ScriptedProvider
from lovia.web.attachments import build_user_input
from lovia.web.errors import WebError

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@dataclass
class Att:
    path: str
    mime: str
    kind: str
    name: str | None = None


@dataclass
class Req:
    message: str
    attachments: list[Any] = field(default_factory=list)


class TextOnly(ScriptedProvider):
    supports_vision = False


def test_no_attachments_is_the_plain_message() -> None:
    assert build_user_input(Req("hello"), Agent(name="a", model=ScriptedProvider([]))) == "hello"


def test_attachments_become_parts(tmp_path: Path) -> None:
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("hi")
    req = Req(
        "look",
        [Att(str(tmp_path / "dot.png"), "image/png", "image"), Att(str(tmp_path / "notes.txt"), "text/plain", "file")],
    )
    [msg] = build_user_input(req, Agent(name="a", model=ScriptedProvider([])))
    assert msg.role == "user"
    text, image, doc = msg.content
    assert isinstance(text, TextPart) and text.text == "look"
    assert isinstance(image, ImagePart) and image.mime_type == "image/png"
    assert isinstance(doc, FilePart) and doc.filename == "notes.txt"


def test_refusals(tmp_path: Path) -> None:
    (tmp_path / "dot.png").write_bytes(PNG)
    image = Att(str(tmp_path / "dot.png"), "image/png", "image")
    with pytest.raises(WebError) as blind:
        build_user_input(Req("x", [image]), Agent(name="a", model=TextOnly([])))
    assert blind.value.status_code == 422
    with pytest.raises(WebError) as gone:
        build_user_input(Req("x", [Att(str(tmp_path / "no.txt"), "text/plain", "file")]), Agent(name="a", model="x"))
    assert gone.value.status_code == 404
