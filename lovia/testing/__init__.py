"""Testing helpers.

* ``ScriptedProvider`` and its turn builders ``text``, ``call``, ``batch``, ``fail``: a model that
  replays canned turns (or a function of the transcript), for offline tests of agents (it lives
  in :mod:`lovia.providers.scripted`). ``text``/``call``/``batch`` return ``AssistantTurn``
  values (:class:`ScriptedReply`) reporting 1 input + 1 output token each.
* ``SessionContract`` / ``CheckpointerContract``: pytest suites any store implementation can run.
* The crash kit (:mod:`lovia.testing.crash`): kill real processes at persistence boundaries.
"""

from __future__ import annotations

from ..providers.scripted import (
    ScriptedProvider,
    ScriptedReply,
    ScriptedRequest,
    ScriptedTurn,
    batch,
    call,
    fail,
    text,
)
from .crash import Boundary, CrashReport, CrashScenario, crash_point, crash_test, record_effect


def __getattr__(name: str) -> object:
    # The contract suites import pytest: load them only when asked for.
    if name in ("SessionContract", "CheckpointerContract"):
        from . import contracts

        return getattr(contracts, name)
    raise AttributeError(f"module 'lovia.testing' has no attribute {name!r}")


__all__ = [
    "Boundary",
    "CheckpointerContract",
    "CrashReport",
    "CrashScenario",
    "ScriptedProvider",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedTurn",
    "SessionContract",
    "batch",
    "call",
    "crash_point",
    "crash_test",
    "fail",
    "record_effect",
    "text",
]
