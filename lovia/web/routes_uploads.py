"""Uploads and branching: files and images attached to a chat, and forking a chat into a new one.

* ``POST /api/sessions/{id}/uploads``: the raw request body is the file; ``X-Filename`` (percent-encoded)
  names it and ``Content-Type`` types it. The body is streamed to a partial file and the size limit is
  checked while reading, so an oversized or interrupted upload is dropped before it is indexed.
* ``GET /api/sessions/{id}/uploads``: the chat's uploads.
* ``POST /api/sessions/{id}/fork``: copy the chat's finished history (whole, or up to just before a
  user message) into a new chat; the original is not touched.

Uploads named in ``attachments`` of the next chat message reach the model as :mod:`lovia.parts`:
an :class:`~lovia.parts.ImagePart` for images, a :class:`~lovia.parts.FilePart` otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
import re
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect

from ..exceptions import UserError
from ..parts import ContentPart, FilePart, ImagePart, TextPart
from ..providers.base import supports_vision
from ..transcript import InputEntry, TranscriptEntry
from .errors import ApiRoute, ErrorCode, WebError
from .ids import check_chat_id, path_inside
from .media import MODEL_IMAGE_MIME_BY_EXT, model_image_mime
from .schemas import ForkRequest, ForkResponse
from .serialization import parse_ref, segments_runs
from .store import ChatIndex, ChatMeta, UploadRecord
from .supervisor import RunSupervisor

__all__ = [
    "DEFAULT_MAX_UPLOAD_MB",
    "DEFAULT_UPLOAD_EXTENSIONS",
    "ForkRequest",
    "attachment_content",
    "check_upload_type",
    "parse_allowed_ext",
    "upload_too_large",
    "uploads_router",
]

DEFAULT_MAX_UPLOAD_MB = 25.0
"""Per-file upload limit in MiB unless ``max_upload_mb=`` / ``LOVIA_MAX_UPLOAD_MB`` says otherwise."""

DEFAULT_UPLOAD_EXTENSIONS = frozenset(
    {
        *MODEL_IMAGE_MIME_BY_EXT,
        "pdf", "txt", "md", "csv", "tsv", "json", "jsonl", "xml", "yaml", "yml", "toml", "log",
        "html", "css", "js", "ts", "py", "sql", "sh", "docx", "xlsx", "pptx", "svg",
    }
)  # fmt: skip
"""The extensions an upload may have unless ``upload_allowed_ext=`` / ``LOVIA_UPLOAD_ALLOWED_EXT`` overrides them."""

_CHUNK_LIMIT = 1 << 20


class WebState(Protocol):
    """The part of :class:`lovia.web.state.WebState` these routes use (a protocol: no import back into the app)."""

    store: ChatIndex

    @property
    def supervisor(self) -> RunSupervisor: ...

    max_upload_bytes: int
    upload_allowed_ext: frozenset[str] | None

    def announce_session(self, meta: ChatMeta) -> None: ...


def parse_allowed_ext(value: str | Iterable[str] | None) -> frozenset[str] | None:
    """An extension allowlist from ``"png, pdf txt"`` or a list; ``None`` (``"*"``) allows any.

    ``value=None`` gives the built-in :data:`DEFAULT_UPLOAD_EXTENSIONS`.
    """
    if value is None:
        return DEFAULT_UPLOAD_EXTENSIONS
    items = re.split(r"[,\s]+", value) if isinstance(value, str) else list(value)
    names = {item.strip().lstrip(".").lower() for item in items if item.strip()}
    return None if "*" in names else frozenset(names)


def _error(status: int, code: ErrorCode, message: str, hint: str | None = None) -> WebError:
    return WebError(status, code, message, hint=hint)


def _clean_name(raw: str | None) -> str:
    name = os.path.basename(unquote(raw or "").replace("\\", "/")).strip()
    name = re.sub(r"[\x00-\x1f\x7f]", "", name)[:200]
    if not name or name in {".", ".."}:
        raise _error(400, "invalid_request", "the upload has no file name", "send the name in the X-Filename header")
    return name


def _suffix(name: str) -> str:
    return Path(name).suffix.lstrip(".").lower()


def _is_image(name: str) -> bool:
    return model_image_mime(name) is not None


def _model_label(model: object) -> str:
    if isinstance(model, str):
        return model
    return str(getattr(model, "model", None) or getattr(model, "name", None) or type(model).__name__)


def _check_vision(state: WebState, meta: ChatMeta, agent: str | None = None) -> None:
    chosen = state.supervisor.agent_for(agent or meta.agent)
    if not supports_vision(chosen.model):
        label = _model_label(chosen.model)
        raise _error(
            422,
            "invalid_request",
            f"the model of this chat ({label}) cannot read images",
            "switch the chat to a vision-capable model, or attach the image as a file it can open another way",
        )


def check_upload_type(state: WebState, name: str) -> None:
    """Refuse (415) a file whose extension is not on the server's upload allowlist."""
    allowed = state.upload_allowed_ext
    ext = _suffix(name)
    if allowed is not None and ext not in allowed:
        shown = ", ".join(sorted(allowed)) or "none"
        raise _error(
            415,
            "unsupported_file_type",
            f"uploads may not be .{ext or '(no extension)'} files",
            f"allowed: {shown}; the server sets the list with LOVIA_UPLOAD_ALLOWED_EXT "
            "or create_app(upload_allowed_ext=...)",
        )


def upload_too_large(state: WebState) -> WebError:
    """The 413 error of an upload over the server's size limit."""
    mib = state.max_upload_bytes / (1 << 20)
    return _error(
        413,
        "file_too_large",
        f"the upload is over the {mib:g} MiB limit",
        "send a smaller file, or raise the server's limit: LOVIA_MAX_UPLOAD_MB or create_app(max_upload_mb=...)",
    )


async def _receive(state: WebState, request: Request, partial: Path) -> int:
    """Stream the body into ``partial``; the size; ``partial`` is removed on any failure."""
    size = 0
    try:
        with partial.open("wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > state.max_upload_bytes:
                    raise upload_too_large(state)
                for start in range(0, len(chunk), _CHUNK_LIMIT):
                    out.write(chunk[start : start + _CHUNK_LIMIT])
    except BaseException:
        _discard(partial)
        raise
    return size


def _discard(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _part_for(upload: UploadRecord) -> ContentPart | None:
    """The upload as a content part read from disk, or ``None`` when its file is gone."""
    if not os.path.exists(upload.path):
        return None
    if _is_image(upload.name):
        return ImagePart.from_path(upload.path, mime_type=model_image_mime(upload.name))
    return FilePart.from_path(upload.path, mime_type=upload.mime_type, filename=upload.name)


def _chat_folder(uploads_dir: Path, session_id: str) -> Path:
    """The chat's uploads folder, proven to lie inside ``uploads_dir`` (a chat stored before the id rule may not)."""
    try:
        check_chat_id(session_id)
        return path_inside(uploads_dir, session_id)
    except UserError as exc:
        raise _error(422, "invalid_request", exc.message, exc.hint) from exc


async def _require(state: WebState, session_id: str) -> ChatMeta:
    meta = await state.store.get(session_id)
    if meta is None:
        raise _error(404, "session_not_found", f"no chat {session_id!r}", "create the chat first: POST /api/sessions")
    return meta


async def attachment_content(
    state: WebState, session_id: str, message: str, attachments: list[str], *, agent: str | None = None
) -> str | list[ContentPart]:
    """The user message with its attachments as parts (just ``message`` when there are none).

    Raises:
        WebError: an unknown upload id (404), or an image for a model without vision (422).
    """
    if not attachments:
        return message
    meta = await _require(state, session_id)
    by_id = {u.id: u for u in await state.store.uploads(session_id)}
    parts: list[ContentPart] = [TextPart(message)] if message else []
    for upload_id in attachments:
        upload = by_id.get(upload_id)
        if upload is not None and _is_image(upload.name):
            _check_vision(state, meta, agent)
        part = await asyncio.to_thread(_part_for, upload) if upload is not None else None
        if part is None:
            raise _error(404, "file_not_found", f"no upload {upload_id!r} in this chat", "upload the file again")
        parts.append(part)
    return parts


def uploads_router(state: WebState) -> APIRouter:
    """The upload and fork routes bound to one app state."""
    router = APIRouter(prefix="/api/sessions", route_class=ApiRoute)
    _upload_routes(router, state)
    _fork_routes(router, state)
    return router


def _upload_routes(router: APIRouter, state: WebState) -> None:
    store = state.store

    @router.post("/{session_id}/uploads")
    async def upload(session_id: str, request: Request) -> dict[str, Any]:
        meta = await _require(state, session_id)
        name = _clean_name(request.headers.get("x-filename"))
        check_upload_type(state, name)
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > state.max_upload_bytes:
            raise upload_too_large(state)  # refused before a byte is read
        if _is_image(name):
            _check_vision(state, meta)
        content_type = (request.headers.get("content-type") or "").split(";")[0].strip()
        mime = model_image_mime(name) or content_type or mimetypes.guess_type(name)[0]
        upload_id = f"up_{uuid.uuid4().hex[:16]}"
        folder = _chat_folder(store.uploads_dir, session_id)
        folder.mkdir(parents=True, exist_ok=True)
        partial = path_inside(folder, f".{upload_id}.partial")
        try:
            size = await _receive(state, request, partial)
        except ClientDisconnect:
            raise _error(400, "invalid_request", "the upload was interrupted", "send the file again") from None
        final = path_inside(folder, f"{upload_id}{Path(name).suffix.lower()}")
        os.replace(partial, final)
        record = UploadRecord(
            upload_id, session_id, name, mime or "application/octet-stream", size, str(final), time.time()
        )
        try:
            await store.add_upload(record)
        except BaseException:
            _discard(final)
            raise
        return record.to_dict()

    @router.get("/{session_id}/uploads")
    async def list_uploads(session_id: str) -> dict[str, Any]:
        await _require(state, session_id)
        return {"uploads": [u.to_dict() for u in await store.uploads(session_id)]}


def _cut(entries: list[TranscriptEntry], user_turn: int | None) -> int:
    if user_turn is None:
        return len(entries)
    users = [i for i, e in enumerate(entries) if isinstance(e, InputEntry) and e.role == "user"]
    if user_turn >= len(users):
        raise _error(
            404,
            "turn_not_found",
            f"the chat has {len(users)} user messages; there is no user_turn {user_turn}",
            "reload the chat and pick a message it still has",
        )
    return users[user_turn]


def _fork_routes(router: APIRouter, state: WebState) -> None:
    store, sup = state.store, state.supervisor

    @router.post("/{session_id}/fork")
    async def fork(session_id: str, body: ForkRequest | None = None) -> ForkResponse:
        user_turn = body.user_turn if body is not None else None
        ref = body.ref if body is not None else None
        meta = await _require(state, session_id)
        async with sup.lock(session_id):
            if ref is not None:
                user_turn = parse_ref(ref, segments_runs(await store.session.segments(session_id)))
                if user_turn is None:
                    raise _error(
                        404, "turn_not_found", f"no user message {ref!r} in this chat", "reload the chat and pick again"
                    )
            if user_turn is None and sup.get(session_id) is not None:
                raise _error(409, "run_active", "a run is live in this chat", "wait for it to finish, then branch")
            if user_turn is None and meta.active_run_id:
                raise _error(
                    409,
                    "run_unfinished",
                    "the chat's last run was interrupted and can still resume",
                    "open the chat to resume it (or stop it), then branch",
                )
            segments = await store.session.segments(session_id)  # finished runs only: a live one is not there
            _cut([e for s in segments for e in s.entries], user_turn)  # 404 for a message the chat lacks
            new_id = await store.fork(session_id, user_turn=user_turn)
            new = await store.get(new_id) if new_id is not None else None
            if new is None:
                raise _error(409, "nothing_to_fork", "there is no finished history before that point")
        state.announce_session(new)
        return ForkResponse(session_id=new.id)
