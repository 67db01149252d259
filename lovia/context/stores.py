"""Result stores: where offloaded tool outputs live, keyed by a content digest.

A :class:`ResultStore` is a two-method protocol. Keys are content digests (:func:`content_key`,
sha256 hex), so the same output stored by two sessions lands on one key and a key can never name
somebody else's data. Both bundled stores nevertheless take any string as a key. Bundled:
:class:`FileResultStore` (one file per result, durable, no eviction) and
:class:`InMemoryResultStore` (an LRU, bounded by default, for tests and ephemeral runs).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..exceptions import StoreError

__all__ = [
    "FileResultStore",
    "InMemoryResultStore",
    "ResultStore",
    "content_key",
    "is_valid_key",
    "result_file_name",
]

_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")


def content_key(content: str) -> str:
    """The sha256 hex digest of ``content`` (UTF-8): the key a stage stores it under."""
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def is_valid_key(key: str) -> bool:
    """Whether ``key`` is a safe store key: 1-128 chars of ``[A-Za-z0-9_-]`` (no dots, no slashes)."""
    return isinstance(key, str) and _KEY_RE.fullmatch(key) is not None


def _check_key(key: str) -> None:
    if not isinstance(key, str):
        raise StoreError(f"result-store keys are strings, not {type(key).__name__}", hint="pass the content digest")


# A key of these characters names its file itself (lovia 0.9.119's form); any other key is hashed.
_NAMED_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def result_file_name(key: str) -> str:
    """The file a :class:`FileResultStore` keeps ``key`` in: distinct keys never share a name.

    A key of 1-64 letters, digits, ``-`` or ``_`` gives ``<key>-<sha1(key)[:16]>.txt``, the name
    lovia 0.9.119 wrote (the fixed-length tail makes the key readable back from the name); any
    other key (empty, with ``/``, ``:`` or ``.``, CJK, longer) gives ``~<sha256(key)>.txt``, which
    no named key can produce.
    """
    raw = key.encode("utf-8", "surrogatepass")
    if _NAMED_KEY_RE.fullmatch(key):
        return f"{key}-{hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16]}.txt"
    return f"~{hashlib.sha256(raw).hexdigest()}.txt"


@runtime_checkable
class ResultStore(Protocol):
    """Archive for full tool outputs that the view only previews."""

    async def put(self, key: str, content: str) -> None:
        """Store ``content`` under ``key`` (a content digest); storing again is harmless."""
        ...

    async def get(self, key: str) -> str | None:
        """The content stored under ``key``, or ``None``."""
        ...


class InMemoryResultStore:
    """A bounded LRU store kept in process memory (lost on exit).

    Args:
        max_entries: How many results to keep; the least recently used goes first. ``None``
            keeps every result (unbounded).
    """

    def __init__(self, *, max_entries: int | None = 1024) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None for no bound)")
        self.max_entries = max_entries
        self._data: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    async def put(self, key: str, content: str) -> None:
        """Store ``content`` under ``key`` and mark it most recently used."""
        _check_key(key)
        self._data[key] = content
        self._data.move_to_end(key)
        while self.max_entries is not None and len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    async def get(self, key: str) -> str | None:
        """The content under ``key`` (marking it most recently used), or ``None``."""
        _check_key(key)
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value


class FileResultStore:
    """One UTF-8 file per result under ``dir``; writes are atomic (temp file + rename).

    Any string is a key; :func:`result_file_name` maps it to a file inside ``dir``. Files are
    never evicted. File I/O runs on a worker thread so the event loop stays free. Results our
    earlier releases stored as ``<key>.txt`` are still read.

    Args:
        dir: The directory to keep results in (created when missing).
    """

    def __init__(self, dir: str | os.PathLike[str]) -> None:
        self.dir = Path(dir)

    def _path(self, key: str) -> Path:
        _check_key(key)
        name = result_file_name(key)
        if os.sep in name or (os.altsep and os.altsep in name) or name.startswith("."):
            raise StoreError(f"result-store key {key!r} maps outside {self.dir}", hint="report this as a lovia bug")
        return self.dir / name

    def _legacy_path(self, key: str) -> Path | None:
        """``<key>.txt``, where our releases before 0.9.119's naming kept a result (valid keys only)."""
        return self.dir / f"{key}.txt" if is_valid_key(key) else None

    async def put(self, key: str, content: str) -> None:
        """Write ``content`` to the key's file atomically, replacing what was stored under ``key``."""
        path = self._path(key)
        try:
            await asyncio.to_thread(self._write, path, content)
        except OSError as exc:
            raise StoreError(f"could not write tool result {key!r} to {self.dir}", hint=str(exc)) from exc

    async def get(self, key: str) -> str | None:
        """Read the result stored under ``key``, or ``None`` when there is none."""
        paths = [p for p in (self._path(key), self._legacy_path(key)) if p is not None]
        try:
            for path in paths:
                found = await asyncio.to_thread(self._read, path)
                if found is not None:
                    return found
            return None
        except OSError as exc:
            raise StoreError(f"could not read tool result {key!r} from {self.dir}", hint=str(exc)) from exc

    @staticmethod
    def _write(path: Path, content: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            with open(path, encoding="utf-8", errors="surrogatepass", newline="") as fh:
                return fh.read()
        except FileNotFoundError:
            return None
