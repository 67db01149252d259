"""A file attached to a chat message by path is read from the descriptor that was judged.

The attack: while messages attach ``pic.png``, another process keeps swapping that name between
an inside picture and a hard link to a file outside the workspace. Judging the name and then
opening it again by name (as the route once did) hands the outside bytes to the model now and
then; reading from the judged descriptor never does.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import httpx

from lovia import Agent
from lovia.parts import ImagePart
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry, TranscriptEntry
from lovia.web import create_app
from lovia.workspace import Workspace

from .helpers import ThreadServer

INSIDE = b"\x89PNG\r\n\x1a\n inside picture"
OUTSIDE = b"\x89PNG\r\n\x1a\n outside secret 51f0"


def test_attachments_racing_a_hard_link_swap_never_hand_the_model_the_outside_file(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pic.png").write_bytes(INSIDE)
    (tmp_path / "outside.png").write_bytes(OUTSIDE)
    seen: list[bytes] = []

    def look(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        last = next(e for e in reversed(entries) if isinstance(e, InputEntry))
        parts = last.content if isinstance(last.content, list) else []
        seen.extend(base64.b64decode(p.data) for p in parts if isinstance(p, ImagePart) and p.data)
        return text("looked")

    agent = Agent(name="eyes", model=ScriptedProvider(look), workspace=Workspace.local(str(root)))
    swapper = subprocess.Popen(
        [
            "sh",
            "-c",
            f'while :; do ln -f "{tmp_path}/outside.png" pic.tmp && mv -fT pic.tmp pic.png; '
            f'cp "{root}/inside.keep" pic.new && mv -fT pic.new pic.png; done',
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (root / "inside.keep").write_bytes(INSIDE)
    attach = [{"path": "pic.png", "mime": "image/png", "kind": "image"}]
    try:
        with (
            ThreadServer(create_app(agent, db_path=str(tmp_path / "web.db"))) as srv,
            httpx.Client(timeout=60) as client,
        ):
            # At least 80 messages; on a busy machine the swapper may hold the outside link for long
            # stretches, so keep going (up to 400) until the inside picture has come through once.
            for n in range(400):
                client.post(f"{srv.url}/api/chat", json={"message": "look", "attachments": attach})
                if n >= 79 and INSIDE in seen:
                    break
    finally:
        swapper.kill()
        swapper.wait()
    assert OUTSIDE not in seen  # never the outside file's bytes
    assert INSIDE in seen  # and the inside picture did get through
