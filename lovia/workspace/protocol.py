"""The shapes a workspace implementation fills: the session, the shell executor seam, the workspace."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..plugins.base import ViewInjector
    from ..tools import Tool
    from .policy import Decision, WorkspacePolicy
    from .types import (
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
    )

__all__ = ["ShellExecutor", "WorkspaceLike", "WorkspaceSession"]


@runtime_checkable
class WorkspaceSession(Protocol):
    """A live, policy-enforcing session: what tools reach as ``ctx.workspace``."""

    policy: WorkspacePolicy

    def decide_path(self, path: str, *, write: bool = False) -> Decision: ...
    def decide_command(self, command: str, cwd: str = ".") -> Decision: ...
    async def read_text(self, path: str, *, start: int | None = None, end: int | None = None) -> FileContent: ...
    async def read_bytes(self, path: str, *, max_bytes: int | None = None) -> FileBytes: ...
    async def write_text(self, path: str, content: str, *, create_only: bool = False) -> FileChange: ...
    async def edit_text(self, path: str, old: str, new: str, *, replace_all: bool = False) -> EditResult: ...
    async def list_files(
        self,
        path: str = ".",
        *,
        pattern: str | None = None,
        include_hidden: bool = False,
        max_results: int | None = None,
    ) -> list[DirEntry]: ...
    async def grep(
        self,
        pattern: str,
        *,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        include_hidden: bool = False,
        max_matches: int | None = None,
    ) -> list[GrepMatch]: ...
    async def run(
        self, command: str, *, cwd: str = ".", timeout: float | None = None, env: Mapping[str, str] | None = None
    ) -> CommandResult: ...
    async def spawn(self, command: str, *, cwd: str = ".", env: Mapping[str, str] | None = None) -> ProcessStart: ...
    async def read_process_output(self, process_id: str) -> ProcessOutput: ...
    async def kill_process(self, process_id: str) -> ProcessOutput: ...
    def background_processes(self) -> list[ProcessStatus]: ...
    async def close(self) -> None: ...


@runtime_checkable
class ShellExecutor(Protocol):
    """Runs a command after the policy and approval gates passed: it decides *how*, never *whether*."""

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float | None,
        policy: WorkspacePolicy,
        root: Path,
    ) -> CommandResult: ...


@runtime_checkable
class WorkspaceLike(Protocol):
    """What ``Agent(workspace=...)`` accepts: opens sessions and describes their tools and prompt."""

    @property
    def close_after_run(self) -> bool: ...
    async def open(self) -> WorkspaceSession: ...
    def tools(self) -> list[Tool[object]]: ...
    def instructions(self) -> str: ...
    def view_injectors(self) -> list[ViewInjector]: ...
