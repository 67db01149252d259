"""Path resolution: every path is judged by where it lands after symlinks, ``~`` and ``..``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkspaceError

__all__ = ["ResolvedPath", "resolve_path"]


@dataclass(frozen=True)
class ResolvedPath:
    """A path as asked (``raw``), where it lands (``abs``) and, inside the root, relative to it."""

    raw: str
    abs: Path
    rel: str | None

    @property
    def inside(self) -> bool:
        """True when the resolved path is the root or below it."""
        return self.rel is not None

    @property
    def abs_posix(self) -> str:
        """The resolved absolute path with forward slashes."""
        return self.abs.as_posix()

    def display(self) -> str:
        """How the path is named in results and messages: relative inside the root, else absolute."""
        return self.rel if self.rel is not None else self.abs_posix


def resolve_path(root: Path, path: str, *, base: Path | None = None) -> ResolvedPath:
    """Resolve ``path`` (relative to ``base``, default ``root``) following every symlink.

    Raises:
        WorkspaceError: The path is empty or contains a NUL byte.
    """
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("empty path", hint="name a file, e.g. 'README.md' or '.' for the root")
    if "\x00" in path:
        raise WorkspaceError("the path contains a NUL byte", hint="pass a plain file path")
    real_root = Path(os.path.realpath(root))
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    joined = expanded if os.path.isabs(expanded) else os.path.join(base if base is not None else real_root, expanded)
    try:
        landed = Path(os.path.realpath(joined))
    except OSError:  # a component changed while it was being resolved (a racing symlink swap)
        raise WorkspaceError(f"{path!r} changed while it was being resolved", hint="retry the call") from None
    rel: str | None
    if landed == real_root:
        rel = "."
    else:
        try:
            rel = landed.relative_to(real_root).as_posix()
        except ValueError:
            rel = None
    return ResolvedPath(raw=path, abs=landed, rel=rel)
