"""``LocalWorkspaceSession``: the one choke point every file operation and command passes through.

``deny`` is enforced here, whoever calls (the built-in tools, a custom tool, plain code); ``ask``
is only reported (:meth:`LocalWorkspaceSession.decide_path`, :meth:`~LocalWorkspaceSession.decide_command`)
so the tool layer can route it through the run's approval channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..exceptions import UserError
from . import _files
from ._grep import RegexWorker
from ._proc import BackgroundProcess, build_env, run_foreground, spawn_background
from .command_guard import extract_path_claims
from .errors import PermissionDeniedError, WorkspaceClosedError, WorkspaceError
from .paths import ResolvedPath, pin, resolve_path
from .policy import Decision, FileOp, WorkspacePolicy, merge_decisions
from .types import (
    ClippedList,
    CommandResult,
    DirEntry,
    EditResult,
    FileBytes,
    FileChange,
    FileContent,
    GrepMatch,
    ProcessOutput,
    ProcessStart,
    ProcessStatus,
    WorkspaceLimits,
)

if TYPE_CHECKING:
    from .protocol import ShellExecutor

__all__ = ["LocalWorkspaceSession"]


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over ``/``-separated relative paths (``**`` spans directories).

    Raises:
        WorkspaceError: The glob can match nothing a walk yields (``.``, ``..``, absolute, empty parts).
    """
    parts = pattern.split("/")
    if pattern.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise WorkspaceError(
            f"invalid glob {pattern!r}: it is matched against paths relative to the searched folder",
            hint="use a relative glob such as '*.py' or '**/*.md' (no '.', '..' or empty parts)",
        )
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _glob_matches(rx: re.Pattern[str], pattern: str, rel: str) -> bool:
    target = rel if "/" in pattern else rel.rsplit("/", 1)[-1]
    return rx.match(target) is not None


_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,)")


_CLIP_MARKER = " [... line truncated]"


def _clip(line: str, width: int) -> str:
    """``line`` cut to ``width`` characters, the marker included."""
    if width <= len(_CLIP_MARKER):
        return line[:width]
    return line[: width - len(_CLIP_MARKER)] + _CLIP_MARKER


def _clip_output(text: str, cap: int) -> tuple[str, bool]:
    """``text`` within ``cap`` characters: its first and last halves kept, the cut announced."""
    if len(text) <= cap:
        return text, False
    half = max(cap // 2, 1)
    marker = f"\n[... {len(text) - 2 * half} characters of output truncated: first and last parts kept ...]\n"
    return text[:half] + marker + text[-half:], True


def _clip_result(result: CommandResult, cap: int) -> CommandResult:
    """A custom executor's result held to the same output cap as the built-in shell."""
    stdout, cut_out = _clip_output(result.stdout, cap)
    stderr, cut_err = _clip_output(result.stderr, cap)
    if not (cut_out or cut_err):
        return result
    return result.model_copy(update={"stdout": stdout, "stderr": stderr, "truncated": True})


def _lexists(path: Path) -> bool:
    try:
        return os.path.lexists(path)
    except (ValueError, OSError):  # NUL bytes, over-long names
        return False


def _printable(name: str) -> str:
    """A file name that is not valid UTF-8 shown with escapes (it must fit in a JSON transcript)."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


_JUDGEMENT_TTL = 3600.0
"""A judgement older than this (an approval nobody answered) no longer binds the next operation."""
_JUDGEMENTS_PER_PATH = 16
_JUDGED_PATHS = 1024


@dataclass(frozen=True)
class _Judgement:
    """Where a path landed when :meth:`LocalWorkspaceSession.judge_path` judged it."""

    at: float
    abs: Path
    ident: tuple[int, int] | None
    decision: Decision


@dataclass(eq=False)
class _PathLock:
    """One file's turn-taking lock and how many operations hold or await it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass(eq=False)
class LocalWorkspaceSession:
    """A live workspace on the local disk: files under ``root``, commands via the system shell."""

    root: str | Path
    policy: WorkspacePolicy = field(default_factory=WorkspacePolicy)
    env: Mapping[str, str] | None = None
    shell_timeout: float | None = 300.0
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)
    inherit_env: bool = False
    executor: ShellExecutor | None = None
    id: str = field(default_factory=lambda: f"local-{uuid.uuid4().hex[:8]}")

    def __post_init__(self) -> None:
        real = Path(os.path.realpath(os.path.expanduser(str(self.root))))
        if not real.is_dir():
            raise UserError(
                f"workspace root {str(self.root)!r} does not exist or is not a directory",
                hint="create the folder first, or pass an existing one",
            )
        self._root = real
        self._closed = False
        self._procs: dict[str, BackgroundProcess] = {}
        self._counter = 0
        self._judged: dict[str, list[_Judgement]] = {}
        self._inflight: set[asyncio.Event] = set()
        self._locks: dict[Path, _PathLock] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def root_path(self) -> Path:
        """The resolved root directory."""
        return self._root

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    async def close(self) -> None:
        """Kill in-flight commands and every background process, and refuse further use (idempotent).

        A foreground command still running gets a result without an exit code (``ok=False``).
        """
        self._closed = True
        for abort in list(self._inflight):
            abort.set()
        procs, self._procs = list(self._procs.values()), {}
        await asyncio.gather(*(p.kill() for p in procs), return_exceptions=True)

    async def __aenter__(self) -> LocalWorkspaceSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise WorkspaceClosedError(
                f"workspace session {self.id} is closed", hint="open a new session (the run that owned it ended)"
            )

    # ------------------------------------------------------------------ decisions

    def _resolve(self, path: str, *, base: Path | None = None) -> ResolvedPath:
        return resolve_path(self._root, path, base=base)

    def _decide(self, rp: ResolvedPath, op: FileOp) -> Decision:
        rel = rp.rel
        if rp.ident is None:
            rp = pin(rp)
        if op == "read" and rel is not None and rp.links > 1:
            # A second hard link could be anywhere: judge such a file as if it lived outside.
            return merge_decisions(
                self.policy.decide_path(rel=rel, abs_posix=rp.abs_posix, op=op),
                self.policy.decide_path(rel=None, abs_posix=rp.abs_posix, op=op),
            )
        return self.policy.decide_path(rel=rel, abs_posix=rp.abs_posix, op=op)

    def _gate(self, path: str, *ops: FileOp, base: Path | None = None, judged: bool = True) -> ResolvedPath:
        """Resolve ``path`` once, pinned: the resolution every check of this call and the operation share."""
        self._check_open()
        rp = pin(self._resolve(path, base=base))
        if judged and base is None:
            self._match_judgement(path, rp)
        for op in ops:
            if self._decide(rp, op) == "deny":
                verb = "reading" if op == "read" else "writing"
                raise PermissionDeniedError(
                    f"{verb} {path!r} is denied by the workspace policy",
                    hint="work with files the policy allows; ask the user if you need this one",
                )
        return rp

    def resolve_judged(self, path: str, *, write: bool = False) -> tuple[ResolvedPath, Decision]:
        """One pinned resolution of ``path`` and the policy's verdict on it, for callers that then open it.

        Open ``rp.abs`` without following a final symlink and insist that the descriptor is
        ``rp.ident`` (``(st_dev, st_ino)``): then what is used is exactly what was judged.
        """
        self._check_open()
        rp = pin(self._resolve(path))
        return rp, self._decide(rp, "write" if write else "read")

    def judge_path(self, path: str, *ops: FileOp) -> Decision:
        """The verdict for ``path`` and ``ops`` (most restrictive), remembered for the operation that follows.

        This is what the tools' approval check calls. The next operation on the same ``path``
        must land exactly where this judgement landed (same resolved path, same file): a
        symlink or hard link swapped in between is refused instead of read or written.
        """
        self._check_open()
        rp = pin(self._resolve(path))
        decision = merge_decisions(*(self._decide(rp, op) for op in ops or ("read",)))
        queue = self._judged.setdefault(path, [])
        queue.append(_Judgement(time.monotonic(), rp.abs, rp.ident, decision))
        if len(queue) > _JUDGEMENTS_PER_PATH:
            del queue[0]
        if len(self._judged) > _JUDGED_PATHS:
            del self._judged[next(iter(self._judged))]
        return decision

    def _match_judgement(self, path: str, rp: ResolvedPath) -> None:
        """Consume the oldest judgement of ``path``; refuse when the path no longer lands where it did."""
        queue = self._judged.pop(path, None)
        if not queue:
            return
        # An "ask" followed by a newer judgement of the same path may have been refused: it never
        # vouches for a later operation (at worst a call approved meanwhile is refused and retried).
        live = [j for i, j in enumerate(queue) if j.decision != "ask" or i == len(queue) - 1]
        judged = live.pop(0)
        if live:
            self._judged[path] = live
        if time.monotonic() - judged.at > _JUDGEMENT_TTL:
            return
        if judged.abs != rp.abs or judged.ident != rp.ident:
            raise PermissionDeniedError(
                f"{path!r} changed between its approval check and its use",
                hint="the path now leads to another file (a symlink or link swapped meanwhile); call the tool again",
            )

    @contextlib.asynccontextmanager
    async def _serial(self, path: str) -> AsyncIterator[None]:
        """Reads, writes and edits of one file (where ``path`` lands) take turns within this session.

        A write replaces the file (a new inode): a read overlapping it would otherwise see its
        pinned file change, and two edits would each overwrite the other's result.
        """
        self._check_open()
        try:
            key = self._resolve(path).abs
        except WorkspaceError:
            yield  # the operation itself reports the bad path
            return
        entry = self._locks.setdefault(key, _PathLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._locks.pop(key, None)

    def decide_path(self, path: str, *, write: bool = False) -> Decision:
        """The policy's verdict for ``path`` (after symlinks), without acting on it."""
        self._check_open()
        return self._decide(pin(self._resolve(path)), "write" if write else "read")

    def decide_command(self, command: str, cwd: str = ".") -> Decision:
        """The verdict for ``command``: its static rules merged with the paths it names."""
        self._check_open()
        verdict = self.policy.decide_command(command)
        if verdict == "deny":
            return verdict
        base = self._resolve(cwd).abs
        claims: list[Decision] = []
        for op, claimed in extract_path_claims(command, exists=lambda w: _lexists(base / w)):
            try:
                claims.append(self._decide(pin(self._resolve(claimed, base=base)), op))
            except WorkspaceError:
                continue
        return merge_decisions(verdict, *claims)

    # ------------------------------------------------------------------ files

    async def read_text(self, path: str, *, start: int | None = None, end: int | None = None) -> FileContent:
        """Lines ``start``..``end`` (1-based, inclusive) of a UTF-8 text file, capped by the limits."""
        async with self._serial(path):
            rp = self._gate(path, "read")
            return await asyncio.to_thread(self._read_text, rp, start, end)

    def _read_text(self, rp: ResolvedPath, start: int | None, end: int | None) -> FileContent:
        shown = rp.display()
        if start is not None and start < 1 or end is not None and end < 1:
            raise WorkspaceError("start and end are 1-based line numbers", hint="use start=1 for the first line")
        cap = self.limits.max_file_read_bytes
        data, size = _files.read_head(rp.abs, shown, limit=cap, pinned=True, ident=rp.ident)
        note = None
        if size > cap:
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else data
            note = (
                f"{shown!r} is {size} bytes, over the {cap}-byte read limit: this is its leading portion "
                f"({len(data)} bytes); grep for what you need further on"
            )
        text = _files.decode_lenient(data, shown)
        lines = text.splitlines(keepends=True)
        total = len(lines)
        first = start or 1
        last = min(end if end is not None else total, total)
        if end is not None and end < first:
            raise WorkspaceError("end is before start", hint="pass end >= start")
        if first > total:  # past the end: nothing to show, and how many lines there are
            return FileContent(
                path=shown, content="", start=first, end=total, total_lines=total, truncated=note is not None, note=note
            )
        budget = self.limits.max_file_read_chars
        taken: list[str] = []
        used = 0
        clipped = False
        for line in lines[first - 1 : last]:
            if used + len(line) > budget:
                if not taken:  # one enormous line: give its head
                    taken.append(line[:budget])
                    clipped = True
                break
            taken.append(line)
            used += len(line)
        shown_end = first - 1 + len(taken)
        return FileContent(
            path=shown,
            content="".join(taken),
            start=first,
            end=shown_end,
            total_lines=total,
            truncated=clipped or shown_end < total or note is not None,
            note=note,
        )

    async def read_bytes(self, path: str, *, max_bytes: int | None = None) -> FileBytes:
        """The raw bytes of a regular file (at most ``max_bytes``, default the read limit)."""
        async with self._serial(path):
            rp = self._gate(path, "read")
            limit = max_bytes if max_bytes is not None else self.limits.max_file_read_bytes
            data = await asyncio.to_thread(
                _files.read_bytes, rp.abs, rp.display(), limit=limit, pinned=True, ident=rp.ident
            )
        return FileBytes(path=rp.display(), data=data)

    async def write_text(self, path: str, content: str, *, create_only: bool = False) -> FileChange:
        """Write a whole file atomically; writing the same content again changes nothing.

        With ``create_only``, an existing file is left alone: ``FileChange(ok=False, ...)``.
        """
        async with self._serial(path):
            rp = self._gate(path, "write")
            return await asyncio.to_thread(self._write_text, rp, content, create_only)

    def _write_text(self, rp: ResolvedPath, content: str, create_only: bool) -> FileChange:
        shown = rp.display()
        kind = _files.existing_kind(rp.abs)
        if kind in ("dir", "other"):
            raise WorkspaceError(f"{shown!r} exists and is not a regular file", hint="write to a file path")
        data = content.encode("utf-8")
        if kind == "file":
            if create_only:
                return FileChange(
                    ok=False,
                    path=shown,
                    action="unchanged",
                    message=f"{shown!r} already exists; pass create_only=false to overwrite it",
                )
            try:
                same = _files.read_bytes(rp.abs, shown, limit=max(len(data), 1)) == data
            except WorkspaceError:
                same = False
            if same:
                return FileChange(path=shown, action="unchanged", bytes_written=0, message="content already matched")
        self._make_parents(rp)
        _files.atomic_write(rp.abs, data, shown)
        return FileChange(path=shown, action="updated" if kind == "file" else "created", bytes_written=len(data))

    def _make_parents(self, rp: ResolvedPath) -> None:
        parent = rp.abs.parent
        if parent.is_dir():
            return
        missing: list[Path] = []
        probe = parent
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        for directory in reversed(missing):
            again = self._resolve(str(directory))
            if again.abs != directory or self._decide(again, "write") == "deny":
                raise PermissionDeniedError(
                    f"creating the directories for {rp.display()!r} is denied", hint="write inside an allowed folder"
                )
            _files.make_dir(directory, rp.display())

    async def edit_text(self, path: str, old: str, new: str, *, replace_all: bool = False) -> EditResult:
        """Replace the exact text ``old`` by ``new`` (exactly one match unless ``replace_all``).

        No match, or several without ``replace_all``, is ``EditResult(ok=False, message=...)``.
        """
        async with self._serial(path):
            rp = self._gate(path, "read", "write")
            return await asyncio.to_thread(self._edit_text, rp, old, new, replace_all)

    def _edit_text(self, rp: ResolvedPath, old: str, new: str, replace_all: bool) -> EditResult:
        shown = rp.display()
        if not old:
            return EditResult(ok=False, path=shown, message="old is empty: quote the exact existing text to replace")
        data = _files.read_bytes(rp.abs, shown, limit=self.limits.max_file_read_bytes, pinned=True, ident=rp.ident)
        try:
            text = _files.decode_text(data, shown)
        except WorkspaceError as exc:  # binary or not UTF-8: left untouched
            return EditResult(ok=False, path=shown, message=f"{exc.message}; the file was not changed")
        if "\r\n" in text and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
        if count == 0:
            if len(new.strip()) >= 3 and old not in new and new in text:
                # The replacement is there and the original is gone: a re-run of an applied edit.
                return EditResult(ok=True, path=shown, replacements=0, changed=False, message="already applied")
            return EditResult(
                ok=False,
                path=shown,
                message=f"the text to replace was not found in {shown!r}: read the file again and copy the exact "
                "text, whitespace included",
            )
        if count > 1 and not replace_all:
            return EditResult(
                ok=False,
                path=shown,
                replacements=count,
                message=f"the text to replace occurs {count} times in {shown!r}: include more surrounding lines to "
                "make it unique, or pass replace_all=true",
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        if updated == text:
            return EditResult(ok=True, path=shown, replacements=count, changed=False, message="no change")
        _files.atomic_write(rp.abs, updated.encode("utf-8"), shown)
        return EditResult(ok=True, path=shown, replacements=count if replace_all else 1, changed=True)

    # ------------------------------------------------------------------ listing and search

    def _visible(self, abs_path: Path, *, rel: str | None, is_link: bool = True) -> tuple[bool, ResolvedPath | None]:
        """Whether a walked entry may be shown: never when denied, by its name or by where it lands."""
        if self.policy.is_denied(rel=rel, abs_posix=abs_path.as_posix()):
            return False, None
        # A plain entry of an already resolved directory lands where it is; only links need resolving.
        landed = pin(
            self._resolve(str(abs_path)) if is_link else ResolvedPath(raw=str(abs_path), abs=abs_path, rel=rel)
        )
        decision = self._decide(landed, "read")
        if decision == "deny" or (not landed.inside and decision != "allow"):
            return False, landed
        return True, landed

    def _walk(self, base: ResolvedPath, include_hidden: bool) -> Iterator[tuple[Path, str, bool]]:
        """``(abs, display path, is_dir)`` under ``base``, sorted, skipping hidden and denied entries."""
        stack = [base.abs]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs: list[Path] = []
            for entry in entries:
                if not include_hidden and entry.name.startswith("."):
                    continue
                path = Path(entry.path)
                rel = self._rel(path)
                ok, _ = self._visible(path, rel=rel, is_link=entry.is_symlink())
                if not ok:
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                yield path, _printable(rel if rel is not None else path.as_posix()), is_dir
                if is_dir:
                    subdirs.append(path)
            stack.extend(reversed(subdirs))

    def _rel(self, path: Path) -> str | None:
        try:
            return path.relative_to(self._root).as_posix()
        except ValueError:
            return None

    async def list_files(
        self,
        path: str = ".",
        *,
        pattern: str | None = None,
        include_hidden: bool = False,
        max_results: int | None = None,
    ) -> list[DirEntry]:
        """Entries of a directory (recursive when a ``pattern`` is given), capped at ``max_results``."""
        rp = self._gate(path, "read")
        return await asyncio.to_thread(self._list, rp, pattern, include_hidden, max_results)

    def _list(
        self, rp: ResolvedPath, pattern: str | None, include_hidden: bool, max_results: int | None
    ) -> ClippedList[DirEntry]:
        if not rp.abs.is_dir():
            raise WorkspaceError(f"{rp.display()!r} is not a directory", hint="pass a directory, e.g. '.'")
        cap = max_results or self.limits.max_list_results
        rx = glob_regex(pattern) if pattern else None
        out: list[DirEntry] = []
        truncated = False
        for abs_path, shown, is_dir in self._walk(rp, include_hidden):
            if rx is None and abs_path.parent != rp.abs:
                continue  # no pattern: this directory only
            if rx is not None and not _glob_matches(rx, pattern or "", abs_path.relative_to(rp.abs).as_posix()):
                continue
            if len(out) >= cap:
                truncated = True
                break
            out.append(self._entry(abs_path, shown, is_dir))
        if rx is None:  # a folder: its directories first, then its files, each by name
            out.sort(key=lambda e: (not e.is_dir, e.path))
        else:  # a search: by path
            out.sort(key=lambda e: e.path)
        return ClippedList(out, truncated=truncated)

    def _entry(self, abs_path: Path, shown: str, is_dir: bool) -> DirEntry:
        try:
            st = os.lstat(abs_path)
        except OSError:
            return DirEntry(path=shown, is_dir=is_dir)
        target = None
        if stat.S_ISLNK(st.st_mode):
            landed = self._resolve(str(abs_path))
            target = landed.display()
            is_dir = landed.abs.is_dir()
        return DirEntry(
            path=shown,
            is_dir=is_dir,
            size=None if is_dir else st.st_size,
            mtime=st.st_mtime,
            symlink_target=target,
        )

    async def grep(
        self,
        pattern: str,
        *,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        include_hidden: bool = False,
        max_matches: int | None = None,
    ) -> list[GrepMatch]:
        """Lines matching a regular expression in text files under ``path`` (denied files never searched)."""
        rp = self._gate(path, "read")
        if _NESTED_QUANTIFIER.search(pattern):
            # The search runs on a worker thread that cannot be interrupted: refuse the classic
            # catastrophic-backtracking shapes rather than burn a core for minutes.
            raise WorkspaceError(
                "the pattern repeats a group that itself repeats (like (a+)+), which can take forever to match",
                hint="simplify the regular expression, e.g. a+ instead of (a+)+",
            )
        flags = re.IGNORECASE if ignore_case else 0
        try:
            re.compile(pattern, flags)  # only to report a malformed pattern; matching runs in a worker
        except re.error as exc:
            raise WorkspaceError(f"invalid regular expression: {exc}", hint="escape special characters") from None
        return await asyncio.to_thread(self._grep, rp, pattern, int(flags), glob, include_hidden, max_matches)

    def _grep(
        self,
        rp: ResolvedPath,
        pattern: str,
        flags: int,
        glob: str | None,
        include_hidden: bool,
        max_matches: int | None,
    ) -> ClippedList[GrepMatch]:
        """The search itself: files are read and judged here, lines matched in a killable worker process."""
        if not os.path.exists(rp.abs):
            raise WorkspaceError(f"{rp.display()!r} does not exist", hint="check the path with list_files")
        cap = max_matches or self.limits.max_grep_matches
        grx = glob_regex(glob) if glob else None
        if rp.abs.is_dir():
            files: Iterator[tuple[Path, str, bool]] = self._walk(rp, include_hidden)
        else:
            files = iter([(rp.abs, rp.display(), False)])
        out: list[GrepMatch] = []
        worker: RegexWorker | None = None
        width = self.limits.max_grep_line_chars
        try:
            for abs_path, shown, is_dir in files:
                if is_dir:
                    continue
                if grx is not None and not _glob_matches(
                    grx, glob or "", abs_path.name if abs_path == rp.abs else abs_path.relative_to(rp.abs).as_posix()
                ):
                    continue
                text = self._grep_text(rp if abs_path == rp.abs else None, abs_path, shown)
                if text is None:
                    continue
                if worker is None:
                    worker = RegexWorker(pattern, flags, deadline=self.limits.max_grep_seconds)
                lines = text.splitlines()
                for number in worker.search(text):
                    if len(out) >= cap:
                        return ClippedList(out, truncated=True)
                    line = lines[number - 1]
                    clipped = line if len(line) <= width else _clip(line, width)
                    out.append(GrepMatch(path=shown, line=number, text=clipped))
        finally:
            if worker is not None:
                worker.close()
        return ClippedList(out, truncated=False)

    def _grep_text(self, gated: ResolvedPath | None, abs_path: Path, shown: str) -> str | None:
        """The text of one file, or ``None`` when it is skipped (too large, binary, special, vanished).

        ``gated`` is the file the call named (already judged, and approved when it asked). A file
        found by walking a folder is judged where it lands, as :meth:`read_text` would judge it:
        anything but ``allow`` (a hard link whose other name may be outside, in a mode that asks
        for outside reads) is skipped, since a folder-wide search cannot ask per file.
        """
        landed = gated
        if landed is None:
            found = self._resolve(str(abs_path)) if os.path.islink(abs_path) else None
            landed = pin(found or ResolvedPath(raw=str(abs_path), abs=abs_path, rel=self._rel(abs_path)))
            if self._decide(landed, "read") != "allow":
                return None
        try:
            data = _files.read_bytes(
                landed.abs, shown, limit=self.limits.max_grep_file_bytes, pinned=True, ident=landed.ident
            )
            return _files.decode_text(data, shown)
        except WorkspaceError:
            return None

    # ------------------------------------------------------------------ commands

    def _command_gate(self, command: str, cwd: str) -> Path:
        self._check_open()
        if not isinstance(command, str) or not command.strip():
            raise WorkspaceError("empty command", hint="pass a shell command line")
        if not self.policy.allow_shell:
            raise PermissionDeniedError("this workspace does not allow shell commands", hint="use the file tools")
        if self.decide_command(command, cwd) == "deny":
            raise PermissionDeniedError(
                f"the command {command!r} is denied by the workspace policy",
                hint="run a different command, or ask the user to run this one",
            )
        where = self._gate(cwd, "read", judged=False)
        if not where.abs.is_dir():
            raise WorkspaceError(f"cwd {cwd!r} is not a directory", hint="use a directory inside the workspace")
        return where.abs

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        return build_env(self._root, inherit=self.inherit_env, base=self.env, extra=extra)

    async def run(
        self, command: str, *, cwd: str = ".", timeout: float | None = None, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        """Run a foreground command; a timeout kills its whole process group."""
        where = self._command_gate(command, cwd)
        limit = timeout if timeout is not None else self.shell_timeout
        environment = self._env(env)
        if self.executor is not None:
            result = await self.executor.run(
                command, cwd=where, env=environment, timeout=limit, policy=self.policy, root=self._root
            )
            return _clip_result(result, self.limits.max_shell_output_chars)
        abort = asyncio.Event()
        self._inflight.add(abort)
        try:
            return await run_foreground(
                command,
                cwd=where,
                env=environment,
                timeout=limit,
                max_chars=self.limits.max_shell_output_chars,
                abort=abort,
            )
        finally:
            self._inflight.discard(abort)

    async def spawn(self, command: str, *, cwd: str = ".", env: Mapping[str, str] | None = None) -> ProcessStart:
        """Start a background process owned by this session (killed with it on :meth:`close`)."""
        where = self._command_gate(command, cwd)
        if self.executor is not None:
            raise WorkspaceError(
                "background processes are not supported with a custom ShellExecutor",
                hint="run the command in the foreground",
            )
        self._counter += 1
        process_id = f"bg-{self._counter}"
        bg = await spawn_background(
            process_id, command, cwd=where, env=self._env(env), cap=self.limits.max_shell_output_chars
        )
        if self._closed:  # closed while it was starting: nothing may outlive the session
            await bg.kill()
            raise WorkspaceClosedError(
                f"workspace session {self.id} closed while the process was starting; it was killed",
                hint="open a new session (the run that owned it ended)",
            )
        self._procs[process_id] = bg
        return ProcessStart(process_id=process_id, pid=bg.proc.pid, command=command)

    def _proc(self, process_id: str) -> BackgroundProcess:
        self._check_open()
        bg = self._procs.get(process_id)
        if bg is None:
            live = ", ".join(sorted(self._procs)) or "none"
            raise WorkspaceError(
                f"no background process {process_id!r} in this session (known: {live})",
                hint="background processes do not survive a restart or a new session: re-run the start command",
            )
        return bg

    async def read_process_output(self, process_id: str) -> ProcessOutput:
        """Output since the last read plus status; an exited process reports its code."""
        bg = self._proc(process_id)
        await bg.settle()
        return bg.drain()

    async def kill_process(self, process_id: str) -> ProcessOutput:
        """Kill a background process's whole group and return its final output."""
        bg = self._proc(process_id)
        await bg.kill()
        return bg.drain()

    async def stop_process(self, process_id: str) -> ProcessStatus:
        """Kill a background process's whole group without consuming its output.

        For a viewer (the web page's Kill button): what the process printed, and its end, stay
        unread for the model's next ``read_process_output``, and the status reminder announces it.
        """
        bg = self._proc(process_id)
        await bg.kill()
        return bg.snapshot()

    async def peek_process_output(self, process_id: str) -> ProcessOutput:
        """The recent output tail (the last 64 KiB) and status of a background process, consuming nothing.

        Unlike :meth:`read_process_output` this never takes output from the model: the tail is
        kept beside the model's unread buffer and ``truncated`` means older output fell off it.
        """
        bg = self._proc(process_id)
        await bg.settle()
        return bg.peek()

    def background_processes(self) -> list[ProcessStatus]:
        """A passive status list (reading it consumes nothing)."""
        return [bg.snapshot() for bg in self._procs.values()]
