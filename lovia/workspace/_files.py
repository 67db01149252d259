"""Internal: file operations on already-judged paths, hardened against races and special files.

Every open pins what it opened: the final component is opened with ``O_NOFOLLOW`` and the
descriptor's real path is compared with the resolved path that was judged, so a symlink
swapped in between the check and the use is refused. Writes go to a temporary file in the
pinned parent directory and are renamed into place, so they are atomic and never write
through a hard link into another file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import uuid
from pathlib import Path

from .errors import FileTooLargeError, WorkspaceError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
BINARY_SNIFF = 8192


def _fd_path(fd: int) -> str | None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            return os.readlink(f"/proc/self/fd/{fd}")
    return None


def _verify(fd: int, expected: Path, shown: str) -> None:
    real = _fd_path(fd)
    if real is not None and real != str(expected):
        raise WorkspaceError(
            f"{shown!r} changed while it was being opened",
            hint="the path was swapped (for example by a symlink); retry",
        )


def _os_error(exc: OSError, shown: str) -> WorkspaceError:
    if exc.errno == errno.ENOENT:
        return WorkspaceError(f"{shown!r} does not exist", hint="check the path with list_files")
    if exc.errno == errno.ELOOP:
        return WorkspaceError(f"{shown!r} changed into a symlink while it was being opened", hint="retry the call")
    if exc.errno == errno.EISDIR:
        return WorkspaceError(f"{shown!r} is a directory", hint="use list_files for directories")
    if exc.errno == errno.ENOTDIR:
        return WorkspaceError(f"a parent of {shown!r} is not a directory", hint="check the path with list_files")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return WorkspaceError(f"{shown!r} is not accessible to this process", hint="pick another file")
    return WorkspaceError(f"{shown!r}: {exc.strerror or exc}", hint="check the path")


def open_regular(
    path: Path, shown: str, *, pinned: bool = False, ident: tuple[int, int] | None = None
) -> tuple[int, os.stat_result]:
    """Open a regular file for reading; devices, FIFOs, sockets and directories are refused.

    With ``pinned``, the opened file must be the one that was judged: ``ident`` is its
    ``(st_dev, st_ino)`` then (``None``: there was no regular file, so none may be opened now).
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (device, FIFO or socket)"
        hint = "use list_files for directories" if stat.S_ISDIR(st.st_mode) else "only regular files can be read"
        raise WorkspaceError(f"{shown!r} is {kind}", hint=hint)
    try:
        _verify(fd, path, shown)
        if pinned and (st.st_dev, st.st_ino) != ident:
            raise WorkspaceError(
                f"{shown!r} changed between the check and the read",
                hint="the file was replaced (for example by a link to another file) while it was judged; retry",
            )
    except WorkspaceError:
        os.close(fd)
        raise
    return fd, st


def read_bytes(
    path: Path, shown: str, *, limit: int, pinned: bool = False, ident: tuple[int, int] | None = None
) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes (``pinned``: see :func:`open_regular`)."""
    fd, st = open_regular(path, shown, pinned=pinned, ident=ident)
    try:
        if st.st_size > limit:
            raise FileTooLargeError(
                f"{shown!r} is {st.st_size} bytes, over the {limit}-byte limit for reads",
                hint="read a part with start/end lines, or grep for what you need",
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # the file grew after fstat
                raise FileTooLargeError(f"{shown!r} is over the {limit}-byte limit for reads", hint="grep instead")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(
    path: Path, shown: str, *, limit: int, pinned: bool = False, ident: tuple[int, int] | None = None
) -> tuple[bytes, int]:
    """At most the first ``limit`` bytes of a regular file, and the file's size when it was opened."""
    fd, st = open_regular(path, shown, pinned=pinned, ident=ident)
    try:
        chunks: list[bytes] = []
        total = 0
        while total < limit:
            chunk = os.read(fd, min(1 << 20, limit - total))
            if not chunk:
                break
            total += len(chunk)
            chunks.append(chunk)
        return b"".join(chunks), max(st.st_size, total)
    finally:
        os.close(fd)


MOSTLY_UNDECODABLE = 0.3
"""Above this share of undecodable characters a file is refused as text (below, they become U+FFFD)."""


def decode_lenient(data: bytes, shown: str) -> str:
    """UTF-8 text where a few undecodable bytes become U+FFFD; binary and mostly-undecodable files are refused."""
    if b"\x00" in data[:BINARY_SNIFF]:
        raise WorkspaceError(f"{shown!r} is a binary file", hint="only text files can be read as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count("\ufffd".encode())
    if bad > len(text) * MOSTLY_UNDECODABLE:
        raise WorkspaceError(
            f"{shown!r} is mostly not UTF-8 text ({bad} undecodable characters)",
            hint="only UTF-8 text files can be read as text; read_bytes gives the raw bytes",
        )
    return text


def decode_text(data: bytes, shown: str) -> str:
    """UTF-8 text, or a clear refusal for binary and non-UTF-8 content."""
    if b"\x00" in data[:BINARY_SNIFF]:
        raise WorkspaceError(f"{shown!r} is a binary file", hint="only text files can be read as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(
            f"{shown!r} is not valid UTF-8 (byte {exc.start})", hint="only UTF-8 text files can be read"
        ) from None


def existing_kind(path: Path) -> str | None:
    """``"file"``, ``"dir"``, ``"other"`` or ``None`` when nothing is there (symlinks not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "other"


def make_dir(path: Path, shown: str) -> None:
    """Create one directory inside its pinned (verified) parent."""
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    try:
        _verify(dir_fd, path.parent, shown)
        os.mkdir(path.name, dir_fd=dir_fd)
    except FileExistsError:
        pass
    except OSError as exc:
        raise _os_error(exc, shown) from None
    finally:
        os.close(dir_fd)


def _remove_stale_temporaries(dir_fd: int, name: str) -> None:
    """Temporaries of an earlier write of ``name`` that was killed mid-way (writes of a session never overlap)."""
    prefix = f".{name}.lovia-"
    with contextlib.suppress(OSError):
        for entry in os.listdir(dir_fd):
            if entry.startswith(prefix) and entry.endswith(".tmp") and len(entry) == len(prefix) + 12:
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=dir_fd)


def atomic_write(path: Path, data: bytes, shown: str) -> None:
    """Write ``data`` to a temporary sibling in the pinned parent directory, then rename it into place."""
    parent = path.parent
    try:
        dir_fd = os.open(parent, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    try:
        _verify(dir_fd, parent, shown)
        _remove_stale_temporaries(dir_fd, path.name)
        tmp = f".{path.name}.lovia-{uuid.uuid4().hex[:8]}.tmp"
        mode = 0o644
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            raise _os_error(exc, shown) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.close(fd)
        try:
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise _os_error(exc, shown) from None
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
