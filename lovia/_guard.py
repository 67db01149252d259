"""Internal: the run's last line of defence.

Two promises the loop keeps whatever happens inside a run:

* the error that leaves ``Runner.run`` is a :class:`~lovia.exceptions.LoviaError` with a
  ``hint`` (:func:`as_lovia_error`). An exception lovia did not raise on purpose (a bug in a hook,
  a store driver's own error, ``MemoryError``...) is re-raised as a LoviaError that is *also* an
  instance of the original class, so ``except RuntimeError`` keeps working; the original stays
  chained as ``__cause__``. Task cancellation and other ``BaseException`` stops pass untouched.
* the terminal checkpoint save (``failed`` / ``interrupted``) does not fail because of what the
  run holds (:func:`save_terminal`): when the first attempt is refused, the unsaved entries are
  made storable (text policy, plain-data ``raw``, placeholders as the very last resort) and the
  save is tried again. A store that is down or a full disk can still refuse it; that is logged and
  the hint of the raised error says what to do.

It also names the one condition every store reports alike: a full disk (:func:`disk_full`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable, MutableSequence
from typing import TYPE_CHECKING, Any, NoReturn

from ._text import clean_entries, clean_value
from .exceptions import LeaseLostError, LoviaError, UserError

if TYPE_CHECKING:
    from .transcript import TranscriptEntry

__all__ = [
    "DISK_FULL_HINT",
    "as_lovia_error",
    "disk_full",
    "raise_as_lovia_error",
    "save_terminal",
    "store_hint",
    "unencodable_key",
]

logger = logging.getLogger("lovia")

DISK_FULL_HINT = (
    "the disk is full: free space on the volume that holds the database (for PostgreSQL, the "
    "server's data directory), then re-issue the same run_id to resume; what was saved is kept"
)
_SQLITE_FULL = 13
_PG_DISK_FULL = "53100"
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) says the disk or a quota is full."""
    for err in _chain(exc):
        if isinstance(err, OSError) and err.errno in _NO_SPACE:
            return True
        if getattr(err, "sqlite_errorcode", None) == _SQLITE_FULL or "database or disk is full" in str(err):
            return True
        if getattr(err, "sqlstate", None) == _PG_DISK_FULL or "No space left on device" in str(err):
            return True
    return False


def store_hint(exc: BaseException, default: str) -> str:
    """The hint for a store failure: :data:`DISK_FULL_HINT` when the disk is full, else ``default``."""
    return DISK_FULL_HINT if disk_full(exc) else default


def unencodable_key(exc: UnicodeError) -> UserError:
    """The error for an id or key a store cannot encode: content is cleaned, keys are never changed."""
    return UserError(
        f"a store key (session_id, run_id...) holds text UTF-8 cannot encode: {exc}",
        hint="ids must be valid Unicode without lone surrogates (U+D800-U+DFFF); lovia replaces those in "
        "content but never rewrites a key, so pass a clean id",
    )


def _hint_for(exc: BaseException) -> str:
    if disk_full(exc):
        return DISK_FULL_HINT
    name = type(exc).__name__
    if isinstance(exc, UnicodeError):
        return (
            f"text that cannot be encoded reached lovia ({name}); the run was stopped and saved as failed. "
            "Please report it with the traceback of __cause__; re-issue the run_id after fixing the input"
        )
    if isinstance(exc, MemoryError):
        return (
            "the process ran out of memory; give it more, or shrink the transcript (context policy), "
            "then re-issue the run_id"
        )
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return (
            "a network call timed out or was refused; the run was saved as interrupted: "
            "re-issue the same run_id to resume"
        )
    return (
        f"{name} escaped the run from outside lovia's own checks (a hook, guardrail, provider, store or plugin); "
        "the original error is chained as __cause__. With a checkpoint the run was saved as failed: fix the cause, "
        "then re-issue the same run_id"
    )


def _default_hint(exc: LoviaError) -> str:
    status = getattr(exc, "status_code", None)
    if status is not None:
        return (
            f"the model endpoint answered HTTP {status}: read its message, check the model name, key and request, "
            "then re-issue the same run_id (a checkpointed run resumes where it stopped)"
        )
    return (
        f"{type(exc).__name__}: see the message for the cause; fix it, then re-issue the same run_id "
        "(a checkpointed run resumes where it stopped)"
    )


_WRAPPERS: dict[type[BaseException], type[LoviaError]] = {}


def _wrapper_class(cls: type[BaseException]) -> type[LoviaError]:
    wrapper = _WRAPPERS.get(cls)
    if wrapper is None:
        # Original class first (isinstance checks still hold), and its text unchanged: the hint is
        # an attribute here, not appended to str() as LoviaError does, so messages read as before.
        namespace = {"__module__": "lovia.exceptions", "__str__": cls.__str__}
        wrapper = type(f"Lovia{cls.__name__}", (cls, LoviaError), namespace)
        _WRAPPERS[cls] = wrapper
    return wrapper


def as_lovia_error(exc: BaseException) -> BaseException:
    """``exc`` itself when it is a LoviaError (given a hint if it had none) or not an ``Exception``;
    otherwise a LoviaError for it.

    The returned error is an instance of ``type(exc)`` too, carries the same ``args`` and
    attributes, reads the same in ``str()``, and has a ``hint``; raise it ``from exc``.
    """
    if isinstance(exc, LoviaError):
        if not exc.hint:  # every error that leaves a run says what to do next
            exc.hint = _default_hint(exc)
        return exc
    if not isinstance(exc, Exception):
        return exc
    message = str(exc) or type(exc).__name__
    hint = _hint_for(exc)
    try:
        cls = _wrapper_class(type(exc))
        wrapped: LoviaError = cls.__new__(cls, *exc.args)
        try:
            type(exc).__init__(wrapped, *exc.args)
        except Exception:
            wrapped.args = exc.args
        wrapped.__dict__.update(getattr(exc, "__dict__", {}))
    except Exception:  # a class that cannot be combined or rebuilt: a plain LoviaError still says it all
        wrapped = LoviaError(f"{type(exc).__name__}: {message}")
    wrapped.message = message
    wrapped.hint = hint
    return wrapped


def raise_as_lovia_error(exc: BaseException) -> NoReturn:
    """Re-raise ``exc`` (inside its ``except`` block) as :func:`as_lovia_error` makes it."""
    wrapped = as_lovia_error(exc)
    if wrapped is exc:
        raise exc
    raise wrapped from exc


def _storable(entry: TranscriptEntry) -> TranscriptEntry:
    """``entry`` if the store codec can encode it, else the closest entry of its kind that it can."""
    from .stores._codec import encode_entries
    from .transcript import AssistantTextEntry, InputEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry, to_json_safe

    try:
        encode_entries([entry]).encode("utf-8")  # what a store would write
        return entry
    except Exception:
        pass
    (entry,) = clean_entries([entry])
    if isinstance(entry, ToolResultEntry):
        entry = ToolResultEntry(entry.call_id, entry.output, clean_value(to_json_safe(entry.raw)), entry.is_error)
    elif isinstance(entry, ReasoningEntry):
        entry = ReasoningEntry(entry.content, entry.id, entry.provider)
    try:
        encode_entries([entry]).encode("utf-8")  # what a store would write
        return entry
    except Exception:
        pass
    dropped = "[content dropped: it could not be stored]"
    if isinstance(entry, ToolResultEntry):
        return ToolResultEntry(str(entry.call_id), dropped, None, True)
    if isinstance(entry, ToolCallEntry):
        return ToolCallEntry(str(entry.call_id), str(entry.name), "{}")
    if isinstance(entry, InputEntry):
        return InputEntry("user" if entry.role != "system" else "system", dropped)
    if isinstance(entry, ReasoningEntry):
        return ReasoningEntry(dropped)
    return AssistantTextEntry(dropped)


async def save_terminal(
    save: Callable[[dict[str, Any]], Awaitable[None]], own: MutableSequence[TranscriptEntry], error: dict[str, Any]
) -> None:
    """Run the terminal ``save(error)``; on a refusal, make ``own`` storable and try once more.

    ``save`` writes the run's terminal status with the given error payload; ``own`` is the run's
    own entry list (the one the checkpoint writer saves from), repaired in place.
    :class:`~lovia.exceptions.LeaseLostError` and cancellation propagate at once.
    """
    error = clean_value(error)
    try:
        await save(error)
        return
    except (LeaseLostError, asyncio.CancelledError):
        raise
    except Exception as exc:
        logger.warning("terminal checkpoint save failed (%s); retrying with storable entries", exc)
    own[:] = [_storable(entry) for entry in own]
    await save({k: str(v) for k, v in error.items()})
