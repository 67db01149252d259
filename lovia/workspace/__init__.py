"""The agent's hands: files, shell and background processes under one allow / ask / deny policy.

``Workspace.local(root, mode=...)`` builds a :class:`LocalWorkspace`; ``Agent(workspace=...)`` gets
its tool bundle and a generated ``## Workspace`` prompt section, and custom tools reach the live
session as ``ctx.workspace``. See ``docs/workspace.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .errors import FileTooLargeError, PermissionDeniedError, WorkspaceClosedError, WorkspaceError
    from .local import LocalWorkspaceSession
    from .policy import CommandRule, Decision, FileOp, PathRule, WorkspacePolicy
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
        WorkspaceLimits,
        WorkspaceMode,
    )
    from .workspace import SCRATCH_DIR, LocalWorkspace, Workspace

_LAZY = {
    "CommandResult": ".types",
    "CommandRule": ".policy",
    "Decision": ".policy",
    "DirEntry": ".types",
    "EditResult": ".types",
    "FileBytes": ".types",
    "FileChange": ".types",
    "FileContent": ".types",
    "FileOp": ".policy",
    "FileTooLargeError": ".errors",
    "GrepMatch": ".types",
    "LocalWorkspace": ".workspace",
    "LocalWorkspaceSession": ".local",
    "PathRule": ".policy",
    "PermissionDeniedError": ".errors",
    "ProcessOutput": ".types",
    "ProcessStart": ".types",
    "ProcessStatus": ".types",
    "SCRATCH_DIR": ".workspace",
    "Workspace": ".workspace",
    "WorkspaceClosedError": ".errors",
    "WorkspaceError": ".errors",
    "WorkspaceLimits": ".types",
    "WorkspaceMode": ".types",
    "WorkspacePolicy": ".policy",
}

__all__ = [
    "SCRATCH_DIR",
    "CommandResult",
    "CommandRule",
    "Decision",
    "DirEntry",
    "EditResult",
    "FileBytes",
    "FileChange",
    "FileContent",
    "FileOp",
    "FileTooLargeError",
    "GrepMatch",
    "LocalWorkspace",
    "LocalWorkspaceSession",
    "PathRule",
    "PermissionDeniedError",
    "ProcessOutput",
    "ProcessStart",
    "ProcessStatus",
    "Workspace",
    "WorkspaceClosedError",
    "WorkspaceError",
    "WorkspaceLimits",
    "WorkspaceMode",
    "WorkspacePolicy",
]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
