"""The agent's hands: files, shell and background processes under one allow / ask / deny policy.

``Workspace.local(root, mode=...)`` builds a :class:`LocalWorkspace`; ``Agent(workspace=...)`` gets
its tool bundle and a generated ``## Workspace`` prompt section, and custom tools reach the live
session as ``ctx.workspace``. See ``docs/workspace.md``.
"""

from __future__ import annotations

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
