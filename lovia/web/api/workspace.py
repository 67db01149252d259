"""The Files panel's API: a read-only view of the served agent's workspace, and uploads into it.

* ``GET /api/workspace``: whether the agent has a workspace, its folder name, mode and limits.
* ``GET /api/workspace/files?path=``: one directory's entries as a JSON array, paged (``offset`` /
  ``limit``); ``X-Total-Count`` says how many the folder shows in all.
* ``GET /api/workspace/recent``: the most recently changed files, an array (a bounded walk of the tree).
* ``GET /api/workspace/file?path=``: a text file's content (413 over the preview cap, 415 for binary).
* ``GET /api/workspace/raw?path=``: a file's bytes, typed so that nothing runs in the page.
* ``POST /api/workspace/upload?agent=``: one file saved as ``uploads/<name>``: a ``multipart/form-data``
  file field, or the raw body named by ``X-Filename``.

Reads go through a read-only session over the agent's root that keeps the agent's
``denied_paths`` (and its ``deny`` path rules), whatever mode the agent itself runs in. Only
paths that land inside the root are served: a symlink out of it is refused like any other
outside path, and a visible name that lands on a dotfile (``env.txt -> .env``, ``g -> .git``)
like the dotfile itself. A path is resolved once; the file opened must be the very file judged
(same device and inode), so a link swapped in meanwhile is refused. Listings leave out
dotfiles and regenerable noise (``__pycache__``, ``*.pyc``, ``node_modules``, ``venv``); the
recent list also skips the scratch folder ``tmp/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import heapq
import mimetypes
import os
import re
import stat
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from ...agent import Agent
from ...exceptions import UserError
from ...workspace import LocalWorkspace, LocalWorkspaceSession, WorkspacePolicy
from ...workspace.errors import WorkspaceError
from ...workspace.paths import ResolvedPath
from ...workspace.workspace import SCRATCH_DIR, WorkspaceSessionBinding
from ..errors import ApiRoute, ErrorCode, WebError
from ..media import PREVIEW_IMAGE_MIME_BY_EXT, model_image_mime, preview_image_mime
from ..routes_uploads import check_upload_type, upload_too_large
from .deps import RouterDeps

__all__ = ["MAX_PREVIEW_BYTES", "UPLOADS_DIR", "attachment_file", "build_workspace_router", "workspace_cfg"]

UPLOADS_DIR = "uploads"
"""The folder under the workspace root that ``POST /api/workspace/upload`` writes into."""

MAX_PREVIEW_BYTES = 1 << 20
"""The largest file ``GET /api/workspace/file`` returns as text (bigger ones: use ``/raw``)."""

MAX_LIST_LIMIT = 1000
"""The most entries one page of ``GET /api/workspace/files`` may ask for."""

MAX_SCAN_ENTRIES = 10_000
"""A directory listing reads at most this many entries; a bigger directory is reported truncated."""

RECENT_WALK_LIMIT = 20_000
"""``GET /api/workspace/recent`` looks at no more than this many entries of the tree."""

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255

NOISE_NAMES = frozenset({"__pycache__", "node_modules", "venv", ".venv"})
NOISE_SUFFIXES = (".pyc", ".pyo")

_INLINE_TYPES = frozenset(mime for mime in PREVIEW_IMAGE_MIME_BY_EXT.values() if mime != "image/svg+xml")
"""Raster images: the only types ``/raw`` serves inline (an SVG can script); the rest only downloads."""

_SANDBOX = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""Sent with every raw file but PDF: opened as a page, the file gets an opaque origin and runs nothing."""

_CHUNK = 1 << 16


def _error(status: int, code: ErrorCode, message: str, hint: str) -> WebError:
    return WebError(status, code, message, hint=hint)


# --------------------------------------------------------------------------- which workspace


@dataclass(frozen=True)
class _Panel:
    """The agent's workspace as the panel sees it: a read-only session, and the agent's own policy."""

    agent: str
    workspace: LocalWorkspace
    session: LocalWorkspaceSession

    @property
    def root(self) -> Path:
        return self.session.root_path


def workspace_cfg(agent: Agent[Any]) -> LocalWorkspace | None:
    """The local folder workspace ``agent`` works in (seen through a per-chat binding), or
    ``None`` when it has none the file panel can show (no workspace, or not a local folder)."""
    workspace = agent.workspace
    if isinstance(workspace, WorkspaceSessionBinding):
        workspace = workspace.workspace
    return workspace if isinstance(workspace, LocalWorkspace) else None


def _panel_policy(policy: WorkspacePolicy) -> WorkspacePolicy:
    """Read-only, inside the root only, with the agent's hard blocks kept."""
    blocks = tuple(rule for rule in policy.path_rules if rule.action == "deny")
    return WorkspacePolicy.readonly(denied_paths=policy.denied_paths, path_rules=blocks)


async def _panel(deps: RouterDeps, agent: str | None, session_id: str | None) -> _Panel:
    name = agent
    if session_id:
        meta = await deps.store.get(session_id)
        if meta is None:
            raise _error(404, "session_not_found", f"no chat {session_id!r}", "list the chats with GET /api/sessions")
        name = name or meta.agent
    name = name or deps.default_agent
    served = deps.agents.get(name)
    if served is None:
        raise _error(
            404, "agent_not_found", f"no served agent {name!r}", f"use one of: {', '.join(sorted(deps.agents))}"
        )
    workspace = workspace_cfg(served)
    if workspace is None:
        why = "has no workspace" if served.workspace is None else "has a workspace that is not a local folder"
        raise _error(
            404,
            "feature_unavailable",
            f"agent {name!r} {why}",
            "serve it with Workspace.local(...) (lovia web: drop --no-workspace, or pass --workspace DIR)",
        )
    try:
        session = LocalWorkspaceSession(root=workspace.root, policy=_panel_policy(workspace.policy))
    except (WorkspaceError, UserError) as exc:  # the root is gone
        raise WebError.from_exc(404, "file_not_found", exc) from None
    return _Panel(name, workspace, session)


# --------------------------------------------------------------------------- the path gate


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in NOISE_NAMES or name.endswith(NOISE_SUFFIXES)


def _check_shape(raw: str) -> str:
    """Refuse what is never a workspace-relative path, before touching the disk."""
    if "\x00" in raw:
        raise _error(400, "invalid_request", "the path contains a NUL byte", "pass a plain workspace-relative path")
    path = raw.strip() or "."
    if len(path) > MAX_PATH_CHARS:
        raise _error(400, "invalid_request", "the path is too long", f"paths are at most {MAX_PATH_CHARS} characters")
    if os.path.isabs(path) or path.startswith("~") or re.match(r"^[A-Za-z]:[\\/]", path):
        raise _error(
            403, "path_denied", "absolute paths are not served", "name the file relative to the workspace root"
        )
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise _error(
                400, "invalid_request", "a path component is too long", f"names are at most {MAX_NAME_BYTES} bytes"
            )
        if part not in (".", "..") and part.startswith("."):
            raise _error(
                403, "path_denied", "hidden (dot) files are not served", "the file panel shows visible files only"
            )
    return path


def _lands_hidden(rel: str) -> bool:
    """Whether a resolved workspace-relative path is, or lies under, a dotfile (``.env``, ``.git/config``)."""
    return rel != "." and any(part.startswith(".") for part in rel.split("/"))


def _gate(panel: _Panel, raw: str) -> ResolvedPath:
    """The path resolved once and pinned (``abs``, ``rel``, ``ident``), or the documented refusal.

    Everything is judged where the path lands, after symlinks: a visible name linking to
    ``.env`` or into ``.git`` is refused like the dotfile itself. The caller opens ``abs``
    without following links and checks the descriptor against ``ident``.
    """
    path = _check_shape(raw)
    try:
        rp, decision = panel.session.resolve_judged(path)
    except WorkspaceError as exc:
        raise WebError.from_exc(400, "invalid_request", exc) from None
    rel = rp.rel
    if rel is None or decision == "deny":
        where = "outside the workspace" if rel is None else "denied by the workspace policy"
        raise _error(
            403, "path_denied", f"{raw!r} is {where}", "pick a file inside the workspace that the agent may read"
        )
    if _lands_hidden(rel):
        raise _error(
            403, "path_denied", f"{raw!r} leads to a hidden (dot) file", "the file panel shows visible files only"
        )
    if not os.path.lexists(rp.abs):
        raise _error(404, "file_not_found", f"{rel!r} does not exist", "list the folder with GET /api/workspace/files")
    return rp


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def _open_file(panel: _Panel, raw: str) -> tuple[int, os.stat_result, str]:
    """A pinned descriptor of a regular file the gate allows (the caller closes it)."""
    rp = _gate(panel, raw)
    landed, rel = rp.abs, rp.display()
    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(landed, os.O_RDONLY | nofollow)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise _error(404, "file_not_found", f"{rel!r} does not exist", "list the folder first") from None
        raise _error(403, "path_denied", f"{rel!r} cannot be opened", "pick another file") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or _fd_path(fd, landed) != str(landed):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise _error(404, "file_not_found", f"{rel!r} is a directory", "list it with GET /api/workspace/files")
        raise _error(403, "path_denied", f"{rel!r} is not a regular file", "only regular files are served")
    if (st.st_dev, st.st_ino) != rp.ident:  # not the file that was judged: swapped in between
        os.close(fd)
        raise _error(403, "path_denied", f"{rel!r} changed while it was checked", "retry")
    return fd, st, rel


# --------------------------------------------------------------------------- listings


def _entry(rel: str, st: os.stat_result, *, link: bool, target: str | None = None) -> dict[str, Any]:
    kind = _kind(st.st_mode)
    return {
        "name": rel.rsplit("/", 1)[-1],
        "path": rel,
        "kind": kind,
        "is_dir": kind == "dir",
        "size": st.st_size if kind == "file" else None,
        "mtime": st.st_mtime,
        "symlink": link,
        "symlink_target": target,
    }


def _shown(panel: _Panel, entry: os.DirEntry[str], where: Path, rel: str) -> dict[str, Any] | None:
    """The entry as listed, or ``None`` when it is hidden, denied or lands outside the root."""
    if _hidden(entry.name):
        return None
    try:
        link = entry.is_symlink()
        if link:
            if panel.session.decide_path(rel) == "deny":
                return None
            target = Path(os.path.realpath(where))
            if target != panel.root and panel.root not in target.parents:
                return None
            st = os.stat(target)
            shown_target = "." if target == panel.root else target.relative_to(panel.root).as_posix()
            if _lands_hidden(shown_target):
                return None
        else:
            if panel.session.policy.is_denied(rel=rel, abs_posix=where.as_posix()):
                return None
            st = entry.stat(follow_symlinks=False)
            shown_target = None
    except (OSError, WorkspaceError):
        return None
    return _entry(rel, st, link=link, target=shown_target)


def _open_dir(landed: Path, rel: str) -> int:
    """A descriptor of the judged directory itself (a folder swapped for a link meanwhile is refused)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(landed, flags)
    except NotADirectoryError:
        raise _error(
            400, "invalid_request", f"{rel!r} is not a directory", "read it with GET /api/workspace/file"
        ) from None
    except FileNotFoundError:
        raise _error(404, "file_not_found", f"{rel!r} does not exist", "list its parent folder") from None
    except OSError:
        raise _error(403, "path_denied", f"{rel!r} cannot be opened", "pick another folder") from None
    if _fd_path(fd, landed) != str(landed):
        os.close(fd)
        raise _error(403, "path_denied", f"{rel!r} changed while it was opened", "retry")
    return fd


def _fd_path(fd: int, fallback: Path) -> str:
    proc = f"/proc/self/fd/{fd}"
    return os.readlink(proc) if os.path.exists(proc) else str(fallback)


def _list_dir(panel: _Panel, raw: str, offset: int, limit: int) -> dict[str, Any]:
    rp = _gate(panel, raw)
    landed, rel = rp.abs, rp.display()
    dir_fd = _open_dir(landed, rel)
    shown: list[dict[str, Any]] = []
    scanned = 0
    capped = False
    try:
        with os.scandir(dir_fd) as it:
            for entry in it:
                scanned += 1
                if scanned > MAX_SCAN_ENTRIES:
                    capped = True
                    break
                child = entry.name if rel == "." else f"{rel}/{entry.name}"
                item = _shown(panel, entry, landed / entry.name, child)
                if item is not None:
                    shown.append(item)
    finally:
        os.close(dir_fd)
    shown.sort(key=lambda e: (e["kind"] != "dir", e["name"].casefold(), e["name"]))
    page = shown[offset : offset + limit]
    return {
        "path": rel,
        "entries": page,
        "total": len(shown),
        "offset": offset,
        "limit": limit,
        "truncated": capped or offset + len(page) < len(shown),
    }


def _walk(panel: _Panel) -> Iterator[tuple[str, os.stat_result]]:
    """Visible regular files of the tree, directories not followed through symlinks, bounded."""
    stack = [(panel.root, "")]
    seen = 0
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > RECENT_WALK_LIMIT:
                return
            if _hidden(entry.name) or (not prefix and entry.name == SCRATCH_DIR):
                continue
            rel = prefix + entry.name
            try:
                if entry.is_symlink():
                    continue  # shown when browsing; the recent list keeps to what lives here
                if panel.session.policy.is_denied(rel=rel, abs_posix=Path(entry.path).as_posix()):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), rel + "/"))
                elif entry.is_file(follow_symlinks=False):
                    yield rel, entry.stat(follow_symlinks=False)
            except OSError:
                continue


def _recent(panel: _Panel, limit: int) -> list[dict[str, Any]]:
    newest = heapq.nlargest(limit, _walk(panel), key=lambda item: item[1].st_mtime)
    return [_entry(rel, st, link=False) for rel, st in newest]


# --------------------------------------------------------------------------- reading


def _read_limit(panel: _Panel) -> int:
    """The most bytes a workspace read may take (the workspace's ``max_file_read_bytes``)."""
    return int(panel.workspace.limits.max_file_read_bytes)


def _too_large(rel: str, size: int, limit: int) -> WebError:
    return _error(
        413,
        "file_too_large",
        f"{rel!r} is {size} bytes, over the workspace's {limit}-byte read limit",
        "open it on the machine that serves the workspace",
    )


def _read_text(panel: _Panel, raw: str) -> dict[str, Any]:
    """The file's text: its head up to the preview limit (``truncated`` past it); ``binary: true``
    with empty content for a file that is not UTF-8 text."""
    fd, st, rel = _open_file(panel, raw)
    try:
        if st.st_size > _read_limit(panel):
            raise _too_large(rel, st.st_size, _read_limit(panel))
        chunks: list[bytes] = []
        size = newlines = 0
        last = b""
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            if size <= MAX_PREVIEW_BYTES:
                chunks.append(chunk)
            size += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > MAX_PREVIEW_BYTES
    head = data[:MAX_PREVIEW_BYTES]
    binary = False
    try:
        if b"\x00" in head[:8192]:
            raise ValueError
        # A cut can split the last character: only a whole file must decode strictly.
        content = head.decode("utf-8", errors="ignore" if truncated else "strict")
        if truncated:
            content = content[: content.rfind("\n") + 1] or content  # whole lines only
    except ValueError:
        content, binary = "", True
    total = newlines + (1 if last not in (b"", b"\n") else 0)
    shown = len(content.splitlines())
    return {
        "path": rel,
        "name": rel.rsplit("/", 1)[-1],
        "size": size,
        "mtime": st.st_mtime,
        "mime_type": _mime(rel),
        "content": content,
        "start": 1,
        "end": 0 if binary else shown,
        "total_lines": 0 if binary else total,
        "truncated": truncated and not binary,
        "binary": binary,
    }


def _mime(rel: str) -> str:
    guessed = preview_image_mime(rel) or mimetypes.guess_type(rel, strict=False)[0]
    return guessed or "application/octet-stream"


def _disposition(kind: str, name: str) -> str:
    ascii_name = re.sub(r"[^A-Za-z0-9._ -]", "_", name) or "file"
    return f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def _stream(fd: int, size: int) -> Iterator[bytes]:
    try:
        left = size
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


def _etag(st: os.stat_result) -> str:
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ino:x}"'


def _etag_matches(header: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag``: ``*``, or a list of tags, weak (``W/``) ones included."""
    if not header:
        return False
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag in (tag.removeprefix("W/") for tag in tags)


def _raw(panel: _Panel, raw: str, download: bool, if_none_match: str | None = None) -> Response:
    """The file's bytes: inline for a raster image, else only as a download (``download=1``);
    an ETag, and 304 when the client holds this version."""
    fd, st, rel = _open_file(panel, raw)
    name = rel.rsplit("/", 1)[-1]
    mime = _mime(rel)
    if st.st_size > _read_limit(panel):
        os.close(fd)
        raise _too_large(rel, st.st_size, _read_limit(panel))
    inline = mime in _INLINE_TYPES
    if not inline and not download:
        os.close(fd)
        raise _error(
            415,
            "unsupported_file_type",
            f"{rel!r} ({mime}) is not shown inline: only raster images are",
            "download it with download=1",
        )
    etag = _etag(st)
    if _etag_matches(if_none_match, etag):
        os.close(fd)
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})
    headers = {
        "Content-Length": str(st.st_size),
        "Content-Disposition": _disposition("attachment" if download else "inline", name),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache",
        "ETag": etag,
    }
    if mime != "application/pdf":  # a PDF viewer does not start in a sandbox; anything else runs no script
        headers["Content-Security-Policy"] = (
            "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
        )
    if mime == "text/plain":
        mime = "text/plain; charset=utf-8"
    return StreamingResponse(_stream(fd, st.st_size), media_type=mime, headers=headers)


# --------------------------------------------------------------------------- uploads


def _upload_name(raw: str | None) -> str:
    name = os.path.basename(unquote(raw or "").replace("\\", "/")).strip()
    name = re.sub(r"[\x00-\x1f\x7f]", "", name)
    if not name or name in (".", ".."):
        raise _error(400, "invalid_request", "the upload has no file name", "send the name in the X-Filename header")
    if name.startswith("."):
        raise _error(400, "invalid_request", "hidden (dot) file names are not accepted", "rename the file")
    if len(name.encode("utf-8", "surrogateescape")) > 200:
        raise _error(400, "invalid_request", "the file name is too long", "use a name of at most 200 bytes")
    return name


def _uploads_dir(panel: _Panel) -> int:
    """A descriptor of ``<root>/uploads`` (created if missing), refused when it leaves the root."""
    folder = panel.root / UPLOADS_DIR
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)
    try:
        fd = os.open(folder, flags)
    except OSError:
        raise _error(
            403, "path_denied", f"{UPLOADS_DIR}/ is not a plain folder inside the workspace", "make it a directory"
        ) from None
    if _fd_path(fd, folder) != str(folder):
        os.close(fd)
        raise _error(403, "path_denied", f"{UPLOADS_DIR}/ leads outside the workspace", "make it a real directory")
    return fd


def _free_name(dir_fd: int, name: str, partial: str) -> str:
    """Hard-link ``partial`` under ``name``, or ``name (2)``..., never replacing a file; the name used."""
    stem, suffix = os.path.splitext(name)
    for n in range(1, 1000):
        candidate = name if n == 1 else f"{stem} ({n}){suffix}"
        try:
            os.link(partial, candidate, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            continue
        return candidate
    raise _error(400, "invalid_request", f"too many files named like {name!r}", "rename the file")


_FORM_OVERHEAD = 64 * 1024
"""Bytes a multipart body may carry beyond the file itself (boundaries and part headers)."""


def _form_file(body: bytes, content_type: str) -> tuple[str | None, str | None, bytes]:
    """``(file name, declared type, bytes)`` of the first file part of a ``multipart/form-data`` body.

    Raises:
        WebError: 400 ``invalid_request`` when the body holds no file part.
    """
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        raise _error(400, "invalid_request", "the multipart body names no boundary", "send the file as form data")
    delimiter = b"--" + match.group(1).encode("latin-1")
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break  # the closing delimiter
        head, sep, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            continue
        headers: dict[str, str] = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        disposition = headers.get("content-disposition", "")
        encoded = re.search(r"filename\*=(?:UTF-8|utf-8)''([^;]+)", disposition)
        plain = re.search(r'filename="((?:[^"\\]|\\.)*)"|filename=([^;]+)', disposition)
        if encoded is None and plain is None:
            continue  # a plain form field
        if encoded is not None:
            name = unquote(encoded.group(1).strip())
        else:
            assert plain is not None
            name = plain.group(1) if plain.group(1) is not None else plain.group(2).strip()
        if data.endswith(b"\r\n"):
            data = data[:-2]
        mime = headers.get("content-type") or None
        return name, mime, data
    raise _error(400, "invalid_request", "the form holds no file", "send one file field (multipart/form-data)")


async def _read_form(request: Request, deps: RouterDeps) -> bytes:
    """The whole multipart body, refused (413) once it is plainly over the upload limit."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > deps.max_upload_bytes + _FORM_OVERHEAD:
            raise upload_too_large(deps)
        chunks.append(chunk)
    return b"".join(chunks)


async def _single(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _upload_kind(name: str) -> str:
    return "image" if model_image_mime(name) is not None else "file"


def _check_upload(panel: _Panel, deps: RouterDeps, name: str) -> None:
    """Refuse an extension the server does not take (415) or a path the policy denies writing (403)."""
    if os.path.splitext(name)[1]:  # a name without an extension is a plain file: always allowed
        check_upload_type(deps, name)
    rel = f"{UPLOADS_DIR}/{name}"
    policy = panel.workspace.policy
    if policy.is_denied(rel=rel, abs_posix=(panel.root / rel).as_posix()) or any(
        r.action == "deny" and "write" in r.ops and r.matches(rel=rel, abs_posix=(panel.root / rel).as_posix())
        for r in policy.path_rules
    ):
        raise _error(403, "path_denied", f"writing {rel!r} is denied by the workspace policy", "rename the file")


def _upload_routes(router: APIRouter, deps: RouterDeps) -> None:
    @router.post("/upload")
    async def upload(request: Request, agent: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        panel = await _panel(deps, agent, session_id)
        content_type = request.headers.get("content-type") or ""
        declared_type: str | None = content_type.split(";")[0].strip() or None
        body: Any = None
        if content_type.lower().startswith("multipart/form-data"):
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > deps.max_upload_bytes + _FORM_OVERHEAD:
                raise upload_too_large(deps)
            try:
                form = await _read_form(request, deps)
            except ClientDisconnect:
                raise _error(400, "invalid_request", "the upload was interrupted", "send the file again") from None
            raw_name, declared_type, data = _form_file(form, content_type)
            name = _upload_name(raw_name)
            if len(data) > deps.max_upload_bytes:
                raise upload_too_large(deps)
            body = _single(data)
        else:
            name = _upload_name(request.headers.get("x-filename"))
        _check_upload(panel, deps, name)
        declared = request.headers.get("content-length")
        if body is None and declared is not None and declared.isdigit() and int(declared) > deps.max_upload_bytes:
            raise upload_too_large(deps)
        dir_fd = _uploads_dir(panel)
        partial = f".upload-{uuid.uuid4().hex[:12]}.partial"
        try:
            size = 0
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
            try:
                async for chunk in body if body is not None else request.stream():
                    size += len(chunk)
                    if size > deps.max_upload_bytes:
                        raise upload_too_large(deps)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            if size == 0:
                raise _error(422, "invalid_request", f"{name!r} is empty", "pick a file that has content")
            stored = _free_name(dir_fd, name, partial)
        except ClientDisconnect:
            raise _error(400, "invalid_request", "the upload was interrupted", "send the file again") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=dir_fd)
            os.close(dir_fd)
        final = f"{UPLOADS_DIR}/{stored}"
        st = os.stat(panel.root / final, follow_symlinks=False)
        mime = model_image_mime(stored) or declared_type or mimetypes.guess_type(stored)[0]
        return {
            "path": final,
            "name": stored,
            "mime": mime or "application/octet-stream",
            "kind": _upload_kind(stored),
            "size": size,
            "mtime": st.st_mtime,
            "renamed": stored != name,
        }


# --------------------------------------------------------------------------- attachments


async def attachment_file(deps: RouterDeps, agent: str | None, raw: str, *, read: bool) -> tuple[str, bytes | None]:
    """``(workspace-relative path, its bytes when read)`` of a file a chat message attaches by path.

    The file is judged as the panel judges a read: inside the agent's workspace root, not denied,
    not hidden, a regular file. The bytes come from the very descriptor that was judged, never
    from a second open by name (a link swapped in between cannot hand over another file).

    Raises:
        WebError: 404 ``feature_unavailable`` (no local workspace), 403 ``path_denied``,
            404 ``file_not_found``, 400 ``invalid_request``.
    """
    panel = await _panel(deps, agent, None)

    def judge() -> tuple[str, bytes | None]:
        fd, _st, rel = _open_file(panel, raw)
        with os.fdopen(fd, "rb") as opened:
            return rel, opened.read() if read else None

    return await asyncio.to_thread(judge)


# --------------------------------------------------------------------------- the router


def build_workspace_router(deps: RouterDeps) -> APIRouter:
    """``GET /api/workspace`` and its ``files``, ``recent``, ``file``, ``raw`` and ``upload`` routes,
    bound to ``deps``."""
    router = APIRouter(prefix="/api/workspace", route_class=ApiRoute)

    @router.get("")
    async def root(agent: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        panel = await _panel(deps, agent, session_id)
        policy = panel.workspace.policy
        mode = "readonly" if not policy.can_write else ("trusted" if policy.read_outside == "allow" else "coding")
        allowed = deps.upload_allowed_ext
        return {
            "available": True,
            "agent": panel.agent,
            "name": panel.root.name or str(panel.root),
            "scratch_dir": SCRATCH_DIR,
            "root": panel.root.name or str(panel.root),
            "mode": mode,
            "uploads_dir": UPLOADS_DIR,
            "limits": {
                "max_preview_bytes": MAX_PREVIEW_BYTES,
                "max_upload_bytes": deps.max_upload_bytes,
                "upload_allowed_ext": sorted(allowed) if allowed is not None else None,
                "max_list_limit": MAX_LIST_LIMIT,
            },
        }

    @router.get("/files")
    async def files(
        path: str = ".",
        agent: str | None = None,
        session_id: str | None = None,
        offset: int = Query(default=0, ge=0),
        limit: int = Query(default=500, ge=1, le=MAX_LIST_LIMIT),
    ) -> JSONResponse:
        panel = await _panel(deps, agent, session_id)
        page = await asyncio.to_thread(_list_dir, panel, path, offset, limit)
        # The body is the page's entries; how many the folder shows in all rides in a header.
        headers = {"X-Total-Count": str(page["total"]), "X-Truncated": "1" if page["truncated"] else "0"}
        return JSONResponse(page["entries"], headers=headers)

    @router.get("/recent")
    async def recent(
        agent: str | None = None, session_id: str | None = None, limit: int = Query(default=20, ge=1, le=200)
    ) -> list[dict[str, Any]]:
        panel = await _panel(deps, agent, session_id)
        return await asyncio.to_thread(_recent, panel, limit)

    @router.get("/file")
    async def file(path: str, agent: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        panel = await _panel(deps, agent, session_id)
        return await asyncio.to_thread(_read_text, panel, path)

    @router.get("/raw")
    async def raw(
        request: Request, path: str, agent: str | None = None, session_id: str | None = None, download: bool = False
    ) -> Response:
        panel = await _panel(deps, agent, session_id)
        return await asyncio.to_thread(_raw, panel, path, download, request.headers.get("if-none-match"))

    _upload_routes(router, deps)
    return router
