"""Path resolution: every path is judged by where it lands after symlinks, ``~`` and ``..``."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import WorkspaceError

__all__ = ["ResolvedPath", "pin", "resolve_path"]


@dataclass(frozen=True)
class ResolvedPath:
    """A path as asked (``raw``), where it lands (``abs``) and, inside the root, relative to it."""

    raw: str
    abs: Path
    rel: str | None
    ident: tuple[int, int] | None = None
    """``(st_dev, st_ino)`` of the regular file found at ``abs`` when it was judged (see :func:`pin`)."""
    links: int = 1
    """Its hard-link count then (more than one: a second name may live anywhere)."""

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


def pin(rp: ResolvedPath) -> ResolvedPath:
    """``rp`` with the identity of the regular file it lands on, so that the later open can insist on it.

    Judging and opening are two steps: whatever is swapped in between (a symlink, a hard link to
    another file renamed over the name) shows as a different ``(st_dev, st_ino)`` at the open.
    """
    try:
        st = os.stat(rp.abs)
    except (OSError, ValueError):
        return rp
    if not stat.S_ISREG(st.st_mode):
        return rp
    return replace(rp, ident=(st.st_dev, st.st_ino), links=st.st_nlink)
