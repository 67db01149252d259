"""The workspace tool bundle: thin wrappers over the run's workspace session (``ctx.workspace``).

Each function takes the live :class:`~lovia.run_context.RunContext`; :func:`build_tools` turns
them into :class:`~lovia.tools.Tool` values with approval predicates that consult the policy
(``ask`` goes through the run's approval channel; ``deny`` is raised by the session itself) and
with the mutators as execution barriers.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from ..parts import ContentPart, ImagePart, TextPart
from ..run_context import RunContext
from ..tools import Tool, tool
from ..transcript import InputEntry, TranscriptEntry
from .errors import WorkspaceError
from .policy import FileOp, WorkspacePolicy
from .protocol import WorkspaceSession
from .types import CommandResult, DirEntry, EditResult, FileChange, FileContent, GrepMatch, ProcessOutput, ProcessStart

__all__ = [
    "background_process_reminder",
    "edit_file",
    "grep_files",
    "kill_process",
    "list_files",
    "path_needs_approval",
    "read_file",
    "read_process_output",
    "require_workspace",
    "shell",
    "view_image",
    "write_file",
]

VIEW_IMAGE_MAX_BYTES = 5 * 1024 * 1024
_PathArg = Annotated[str, "Workspace-relative or absolute file path."]
_ProcArg = Annotated[str, "Process id returned by shell(background=true)."]


def require_workspace(ctx: RunContext[Any]) -> WorkspaceSession:
    """The run's workspace session, or a clear error when the agent has none."""
    ws = getattr(ctx, "workspace", None)
    if ws is None:
        raise WorkspaceError(
            "this run has no workspace", hint="configure Agent(workspace=Workspace.local(...)) to use file tools"
        )
    return ws  # type: ignore[no-any-return]


def path_needs_approval(*ops: FileOp) -> Callable[[dict[str, Any], RunContext[Any]], bool]:
    """An approval predicate: ``True`` when the policy says ``ask`` for the call's ``path`` and ``ops``."""

    def predicate(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        ws = getattr(ctx, "workspace", None)
        path = args.get("path", ".")
        if ws is None or not isinstance(path, str):
            return False
        try:
            judge = getattr(ws, "judge_path", None)
            if callable(judge):  # one resolution, remembered: the call itself must land where this one did
                return bool(judge(path, *ops) == "ask")
            return any(ws.decide_path(path, write=op == "write") == "ask" for op in ops)
        except WorkspaceError:
            return False  # the call itself reports the problem

    return predicate


def _command_needs_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
    ws = getattr(ctx, "workspace", None)
    command, cwd = args.get("command"), args.get("cwd", ".")
    if ws is None or not isinstance(command, str) or not isinstance(cwd, str):
        return False
    try:
        return bool(ws.decide_command(command, cwd) == "ask")
    except WorkspaceError:
        return False


# ---------------------------------------------------------------------- the tools


async def read_file(
    ctx: RunContext[Any],
    path: _PathArg,
    start: Annotated[int | None, Field(default=None, ge=1, description="1-based start line.")] = None,
    end: Annotated[int | None, Field(default=None, ge=1, description="1-based inclusive end line.")] = None,
) -> FileContent:
    """Read a UTF-8 text file, optionally only lines start..end. Long files come back in pages."""
    return await require_workspace(ctx).read_text(path, start=start, end=end)


async def view_image(
    ctx: RunContext[Any], path: Annotated[str, "Workspace-relative or absolute image path."]
) -> list[ContentPart]:
    """Look at an image file from the workspace (PNG, JPEG, GIF, WebP)."""
    mime = mimetypes.guess_type(path)[0] or ""
    if not mime.startswith("image/"):
        raise WorkspaceError(f"{path!r} does not look like an image", hint="pass a .png, .jpg, .gif or .webp file")
    data = await require_workspace(ctx).read_bytes(path, max_bytes=VIEW_IMAGE_MAX_BYTES)
    return [
        TextPart(text=f"{data.path}\n[image: {mime}, {len(data.data)} B]"),
        ImagePart(data=base64.b64encode(data.data).decode(), mime_type=mime),
    ]


async def write_file(
    ctx: RunContext[Any],
    path: _PathArg,
    content: Annotated[str, "Full file content to write."],
    create_only: Annotated[
        bool, Field(default=False, description="If true, never overwrite an existing file.")
    ] = False,
) -> FileChange:
    """Create or overwrite a text file with the full content given (parent folders are created)."""
    change = await require_workspace(ctx).write_text(path, content, create_only=create_only)
    if not change.ok:
        raise WorkspaceError(change.message or f"{path!r} was not written", hint="read the file, then decide")
    return change


async def edit_file(
    ctx: RunContext[Any],
    path: _PathArg,
    old: Annotated[str, "Exact existing text to replace."],
    new: Annotated[str, "Replacement text."],
    replace_all: Annotated[bool, Field(default=False, description="Replace every occurrence of old.")] = False,
) -> EditResult:
    """Replace an exact piece of text in a file. It must occur once, unless replace_all is true."""
    result = await require_workspace(ctx).edit_text(path, old, new, replace_all=replace_all)
    if not result.ok:
        raise WorkspaceError(result.message or f"the edit of {path!r} failed", hint="read the file and retry")
    return result


async def list_files(
    ctx: RunContext[Any],
    path: Annotated[str, "Directory to list, workspace-relative or absolute ('.' is the workspace root)."] = ".",
    pattern: Annotated[str | None, Field(default=None, description="Optional glob pattern, e.g. '**/*.py'.")] = None,
    include_hidden: Annotated[bool, Field(default=False, description="Include dotfiles/directories.")] = False,
    max_results: Annotated[
        int | None,
        Field(
            default=None, ge=1, le=1000, description="Maximum results returned (defaults to the workspace limit, 500)."
        ),
    ] = None,
) -> list[DirEntry]:
    """List a directory; with a pattern, search its whole tree for matching paths."""
    return await require_workspace(ctx).list_files(
        path, pattern=pattern, include_hidden=include_hidden, max_results=max_results
    )


async def grep_files(
    ctx: RunContext[Any],
    pattern: Annotated[str, "Regular expression to search for."],
    path: Annotated[str, "Directory (or single file) to search."] = ".",
    glob: Annotated[
        str | None, Field(default=None, description="Only search files matching this glob, e.g. '*.py'.")
    ] = None,
    ignore_case: Annotated[bool, Field(default=False, description="Case-insensitive matching.")] = False,
    include_hidden: Annotated[bool, Field(default=False, description="Also search dotfiles/dirs.")] = False,
    max_matches: Annotated[
        int | None,
        Field(
            default=None, ge=1, le=1000, description="Maximum matches returned (defaults to the workspace limit, 100)."
        ),
    ] = None,
) -> list[GrepMatch]:
    """Search text files for a regular expression; returns path, line number and line."""
    return await require_workspace(ctx).grep(
        pattern, path=path, glob=glob, ignore_case=ignore_case, include_hidden=include_hidden, max_matches=max_matches
    )


async def shell(
    ctx: RunContext[Any],
    command: Annotated[str, "Shell command line to run."],
    cwd: Annotated[str, "Workspace-relative working directory."] = ".",
    timeout: Annotated[
        float | None,
        Field(default=None, ge=1, description="Override timeout in seconds (ignored with background=true)."),
    ] = None,
    background: Annotated[
        bool,
        Field(
            default=False,
            description="Start the command as a background process and return its process id immediately instead of "
            "waiting for it to finish.",
        ),
    ] = False,
    description: Annotated[
        str | None,
        Field(
            default=None,
            description="One short sentence, in the conversation's language, saying what the command does — shown to "
            "the user while it runs. Omit for short, self-explanatory commands.",
        ),
    ] = None,
) -> CommandResult | ProcessStart:
    """Run a shell command in the workspace and return its exit code and output.

    Use background=true for servers, watchers and long builds, then read_process_output."""
    ws = require_workspace(ctx)
    if background:
        return await ws.spawn(command, cwd=cwd)
    return await ws.run(command, cwd=cwd, timeout=timeout)


async def read_process_output(ctx: RunContext[Any], process_id: _ProcArg) -> ProcessOutput:
    """New output and status (running / exited with code / killed) of a background process."""
    return await require_workspace(ctx).read_process_output(process_id)


async def kill_process(ctx: RunContext[Any], process_id: _ProcArg) -> ProcessOutput:
    """Kill a background process and everything it started; returns its final output."""
    return await require_workspace(ctx).kill_process(process_id)


def background_process_reminder(ctx: RunContext[Any]) -> list[TranscriptEntry] | None:
    """A transient reminder of running (or newly exited) background processes, for each turn's view."""
    ws = getattr(ctx, "workspace", None)
    listing = getattr(ws, "background_processes", None)
    if not callable(listing):
        return None
    lines = []
    for p in listing():
        if p.status == "running":
            lines.append(f"- {p.process_id}: running `{p.command}`")
        elif not p.exit_seen:
            how = "was killed" if p.status == "killed" else f"exited with code {p.exit_code}"
            lines.append(f"- {p.process_id}: `{p.command}` {how} (read_process_output shows its last output)")
    if not lines:
        return None
    text = "<system-reminder>\nBackground processes of this workspace:\n" + "\n".join(lines) + "\n</system-reminder>"
    return [InputEntry(role="user", content=text)]


# ---------------------------------------------------------------------- rendering


def _render_file(raw: Any, ctx: Any) -> str:
    fc: FileContent = raw
    head = f"{fc.path} (lines {fc.start}-{fc.end} of {fc.total_lines})"
    body = fc.content
    if fc.note:
        body += f"\n[{fc.note}]"
    if fc.end < fc.total_lines:
        body += f"\n[... more lines follow: continue with start={max(fc.end + 1, fc.start + 1)}]"
    elif fc.truncated and not fc.note:
        body += f"\n[... line {fc.end} is longer than the read limit: only its head is shown]"
    return f"{head}\n{body}"


def _render_entries(raw: Any, ctx: Any) -> str:
    lines = [e.path + ("/" if e.is_dir else "") + (f" -> {e.symlink_target}" if e.symlink_target else "") for e in raw]
    if getattr(raw, "truncated", False):
        lines.append(f"[... truncated at {len(raw)} entries: narrow the path or pattern]")
    return "\n".join(lines) if lines else "(no entries)"


def _render_matches(raw: Any, ctx: Any) -> str:
    lines = [f"{m.path}:{m.line}: {m.text}" for m in raw]
    if getattr(raw, "truncated", False):
        lines.append(f"[... truncated at {len(raw)} matches: narrow the pattern, path or glob]")
    return "\n".join(lines) if lines else "(no matches)"


def _render_shell(raw: Any, ctx: Any) -> str:
    if isinstance(raw, ProcessStart):
        return f"started background process {raw.process_id} (pid {raw.pid}); read it with read_process_output"
    r: CommandResult = raw
    status = "timed out" if r.timed_out else f"exit code {r.exit_code}"
    parts = [status]
    if r.stdout:
        parts.append(f"stdout:\n{r.stdout}")
    if r.stderr:
        parts.append(f"stderr:\n{r.stderr}")
    if r.truncated:
        parts.append("[output truncated: the first and last parts are kept]")
    return "\n".join(parts)


def _render_process(raw: Any, ctx: Any) -> str:
    p: ProcessOutput = raw
    status = p.status if p.status == "running" else f"{p.status} (exit code {p.exit_code})"
    return f"{p.process_id}: {status}\n{p.output or '(no new output)'}"


def _make(fn: Callable[..., Any], **options: Any) -> Tool[Any]:
    return tool(**options)(fn)


def build_tools(policy: WorkspacePolicy) -> list[Tool[Any]]:
    """The bundle for ``policy``: no write tools when nothing is writable, no shell when it is off."""
    reads = [
        _make(read_file, needs_approval=path_needs_approval("read"), result_renderer=_render_file),
        _make(view_image, needs_approval=path_needs_approval("read")),
        _make(list_files, needs_approval=path_needs_approval("read"), result_renderer=_render_entries),
        _make(grep_files, needs_approval=path_needs_approval("read"), result_renderer=_render_matches),
    ]
    out: list[Tool[Any]] = list(reads)
    if policy.can_write:
        out.append(_make(write_file, needs_approval=path_needs_approval("write"), parallel=False))
        out.append(
            _make(
                edit_file,
                needs_approval=path_needs_approval("read", "write"),
                parallel=False,
            )
        )
    if policy.allow_shell:
        out.append(
            _make(
                shell,
                needs_approval=_command_needs_approval,
                parallel=False,
                idempotent=False,
                result_renderer=_render_shell,
            )
        )
        out.append(_make(read_process_output, result_renderer=_render_process))
        out.append(_make(kill_process, parallel=False, result_renderer=_render_process))
    return out
