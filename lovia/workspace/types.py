"""Typed results of workspace operations, and the limits that bound them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

__all__ = [
    "ClippedList",
    "CommandResult",
    "DirEntry",
    "EditResult",
    "FileBytes",
    "FileChange",
    "FileContent",
    "GrepMatch",
    "ProcessOutput",
    "ProcessStart",
    "ProcessStatus",
    "WorkspaceLimits",
    "WorkspaceMode",
]

WorkspaceMode = Literal["readonly", "coding", "trusted"]
"""A preset policy: ``readonly`` (no writes, no shell), ``coding`` (the default) or ``trusted``."""

_ItemT = TypeVar("_ItemT")


class FileContent(BaseModel):
    """Lines ``start``..``end`` (1-based, inclusive) of a text file."""

    path: str
    content: str
    start: int = Field(ge=1)
    end: int = Field(ge=0)
    total_lines: int
    truncated: bool = False
    """True when more of the file exists than ``content`` holds (lines after ``end``, a cut line, the byte cap)."""
    note: str | None = None
    """Why the content stops early, when it is not plain paging (a file over the read limit)."""


class FileBytes(BaseModel):
    """The raw bytes of a file."""

    path: str
    data: bytes


class FileChange(BaseModel):
    """What a write did."""

    ok: bool = True
    path: str
    action: Literal["created", "updated", "unchanged"]
    bytes_written: int = 0
    message: str | None = None


class EditResult(BaseModel):
    """What an exact-substring edit did."""

    ok: bool
    path: str
    replacements: int = 0
    changed: bool = False
    message: str | None = None


class DirEntry(BaseModel):
    """One listed file or directory (``path`` is workspace-relative when inside the root)."""

    path: str
    is_dir: bool
    size: int | None = None
    mtime: float | None = None
    symlink_target: str | None = None


class GrepMatch(BaseModel):
    """One matching line."""

    path: str
    line: int = Field(ge=1)
    text: str


class CommandResult(BaseModel):
    """The outcome of a foreground command."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 in time."""
        return self.exit_code == 0 and not self.timed_out


ProcessState = Literal["running", "exited", "killed"]


class ProcessStart(BaseModel):
    """A background process was started."""

    process_id: str
    pid: int
    command: str


class ProcessOutput(BaseModel):
    """Output of a background process since the previous read, and its status."""

    process_id: str
    status: ProcessState
    exit_code: int | None = None
    output: str = ""
    truncated: bool = False


class ProcessStatus(BaseModel):
    """A passive view of one background process (reading it consumes nothing)."""

    process_id: str
    command: str
    status: ProcessState
    exit_code: int | None = None
    exit_seen: bool = False


@dataclass(frozen=True)
class WorkspaceLimits:
    """Caps on what one operation returns; every cut is announced in the output."""

    max_file_read_chars: int = 50_000
    max_file_read_bytes: int = 10_000_000
    max_shell_output_chars: int = 30_000
    max_grep_file_bytes: int = 5_000_000
    max_grep_line_chars: int = 400
    max_list_results: int = 500
    max_grep_matches: int = 100
    max_grep_seconds: float = 20.0
    """How long one grep's pattern matching may take in all before its worker process is killed."""


class ClippedList(list[_ItemT]):
    """A list that remembers whether a cap cut it short."""

    truncated: bool

    def __init__(self, items: Iterable[_ItemT] = (), *, truncated: bool = False) -> None:
        super().__init__(items)
        self.truncated = truncated
