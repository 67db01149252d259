"""Errors a workspace raises. All are :class:`~lovia.exceptions.ToolError`: the model sees them."""

from __future__ import annotations

from ..exceptions import ToolError

__all__ = ["FileTooLargeError", "PermissionDeniedError", "WorkspaceClosedError", "WorkspaceError"]


class WorkspaceError(ToolError):
    """A file or shell operation could not be done (bad path, missing file, binary content...)."""


class PermissionDeniedError(WorkspaceError):
    """The workspace policy denies this path or command."""


class WorkspaceClosedError(WorkspaceError):
    """The workspace session was used after ``close()``."""


class FileTooLargeError(WorkspaceError):
    """A file is larger than the workspace limit for this operation."""
