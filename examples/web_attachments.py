"""Attachments and branching in the web app, offline: upload an image and a note, send them, branch the chat.

The scripted model reports which content parts reached it. Run: ``python examples/web_attachments.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import httpx

from lovia import Agent
from lovia.parts import FilePart, ImagePart
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry, TranscriptEntry
from lovia.web import create_app

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def report(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    """Answer with what the last user message carried."""
    last = next(e for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
    parts = last.content if isinstance(last.content, list) else []
    images = sum(isinstance(p, ImagePart) for p in parts)
    files = [p.filename for p in parts if isinstance(p, FilePart)]
    return text(f"I got {images} image(s) and the files {files}.")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(Agent(name="files", model=ScriptedProvider(report)), db_path=str(Path(folder) / "web.db"))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            sid = (await client.post("/api/sessions", json={"title": "demo"})).json()["id"]
            ids = []
            for name, body in (("chart.png", PNG), ("notes.md", b"# notes\n")):
                r = await client.post(f"/api/sessions/{sid}/uploads", content=body, headers={"X-Filename": name})
                ids.append(r.json()["id"])
            refused = await client.post(f"/api/sessions/{sid}/uploads", content=b"MZ", headers={"X-Filename": "a.exe"})
            print("refused:", refused.status_code, refused.json()["detail"]["code"])
            r = await client.post("/api/chat/stream", json={"session_id": sid, "message": "look", "attachments": ids})
            print("answer:", next(line for line in r.text.splitlines() if "I got" in line))
            branch = (await client.post(f"/api/sessions/{sid}/fork")).json()["session_id"]
            detail = (await client.get(f"/api/sessions/{branch}")).json()
            print("branch:", len(detail["entries"]), "entries, origin", detail["origin"]["kind"])
            await app.state.lovia.supervisor.shutdown()
            await app.state.lovia.store.close()


if __name__ == "__main__":
    asyncio.run(main())
