"""The API models refuse what the docs say, the serialization helpers on a real chat, and the exports."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from lovia.messages import Message, ToolCall
from lovia.transcript import entries_to_messages
from lovia.web import create_app
from lovia.web.schemas import (
    ApprovalRequest,
    ChatRequest,
    InjectCancelRequest,
    RewindRequest,
    ScheduleSpec,
    SessionPatch,
)
from lovia.web.serialization import (
    display_text,
    export_html,
    export_md,
    export_txt,
    message_to_out,
    origin_kind,
    segments_runs,
    stamp_refs,
)

from .helpers import scripted_agent


def test_models_refuse_out_of_contract_bodies() -> None:
    with pytest.raises(ValidationError):
        ApprovalRequest(session_id="s", call_id="c", decision="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        InjectCancelRequest(session_id="s", id=-1)
    with pytest.raises(ValidationError):
        RewindRequest(ref="r:0", user_turn=0)  # exactly one target
    with pytest.raises(ValidationError):
        SessionPatch(title="")
    with pytest.raises(ValidationError):
        SessionPatch(title="x" * 121)
    with pytest.raises(ValidationError):
        ChatRequest(message="hi", attachments=["u"] * 21)
    with pytest.raises(ValidationError):
        ScheduleSpec(input="x", trigger_kind="every", trigger_expr="60", until="u" * 2001)
    body = ChatRequest.model_validate(
        {"message": "hi", "attachments": ["up_1", {"path": "a.png", "mime": "image/png", "kind": "image"}]}
    )
    assert body.attachments is not None and body.attachments[0] == "up_1"
    assert not isinstance(body.attachments[1], str) and body.attachments[1].kind == "image"


def test_message_helpers() -> None:
    assert origin_kind("fork") == "fork" and origin_kind("subagent") is None and origin_kind(None) is None
    call = Message(role="assistant", content="ok", tool_calls=[ToolCall(id="c1", name="lookup", arguments="{}")])
    out = message_to_out(call, timestamp=5.0)
    assert out.timestamp == 5.0 and out.tool_calls == [{"id": "c1", "name": "lookup", "arguments": "{}"}]
    assert display_text(Message(role="user", content=None)) == ""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(scripted_agent(), db_path=str(tmp_path / "x.db"))) as c:
        yield c


HOSTILE = '<script>alert(1)</script>" onmouseover="x" <img src=x onerror=alert(2)>'


def test_exports_through_the_route_and_a_hostile_transcript(client: TestClient) -> None:
    r = client.post("/api/chat", json={"message": f"tool {HOSTILE}"})
    assert r.status_code == 200, r.text
    sid = r.json()["session_id"]
    client.patch(f"/api/sessions/{sid}", json={"title": "<b onclick=x>t</b>"})

    md = client.get(f"/api/sessions/{sid}/export", params={"format": "md"})
    assert md.headers["content-type"].startswith("text/markdown")
    assert md.text.startswith("# <b onclick=x>t</b>") and "## User" in md.text and "- tool call" in md.text
    txt = client.get(f"/api/sessions/{sid}/export", params={"format": "txt"}).text
    assert "[tool call] lookup" in txt and "User: tool <script>" in txt

    page = client.get(f"/api/sessions/{sid}/export", params={"format": "html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    body = page.text
    assert '<meta http-equiv="Content-Security-Policy"' in body
    assert "<script" not in body.lower() and "<img" not in body.lower() and "<b " not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    # no attribute escaped its quotes: every tag is one of ours
    tags = set(re.findall(r"<([a-zA-Z0-9]+)", body))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "code", "section", "pre"}
    assert '" onmouseover="' not in body and "&quot; onmouseover=&quot;" in body
    assert "http://" not in body and "https://" not in body and "src=" not in body.replace("src=x", "")

    assert client.get(f"/api/sessions/{sid}/export", params={"format": "pdf"}).status_code == 422


def test_serialization_over_a_real_chat(client: TestClient) -> None:
    sid = client.post("/api/chat", json={"message": "tool lookup please"}).json()["session_id"]
    detail = client.get(f"/api/sessions/{sid}").json()
    refs = [e["ref"] for e in detail["entries"] if e["role"] == "user"]
    assert refs and refs[0] is not None
    transcript = detail["transcript"]
    assert transcript
    # the same messages through the typed helpers, from the stored segments
    from lovia.session import Segment
    from lovia.transcript import entry_from_dict

    entries = [entry_from_dict(d) for d in transcript]
    run_id = refs[0].split(":")[0]
    runs = segments_runs([Segment(run_id=run_id, entries=entries)])
    msgs = entries_to_messages(entries)
    outs = stamp_refs([message_to_out(m) for m in msgs], runs)
    assert [o.ref for o in outs if o.role == "user"] == refs
    assert any(o.tool_calls for o in outs)
    assert export_txt(msgs).startswith("User: tool lookup please")
    md = export_md(msgs, title="T", session_id=sid)
    assert md.startswith("# T")
    # the tool call the model made before answering is filed under the assistant, not the user
    user_part, after = md.split("## User", 1)[1].split("## Assistant", 1)
    assert "tool call" not in user_part and "- tool call `lookup" in after
    assert '<section class="call"><h2>Tool call</h2><pre>lookup {&quot;q&quot;' in export_html(
        msgs, title="T", session_id=sid
    )
