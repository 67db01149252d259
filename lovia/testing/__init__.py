"""Testing helpers: ``ScriptedProvider`` and its turn builders, the store contract suites, the crash kit."""

from __future__ import annotations

from ._scripted import ScriptedProvider, ScriptedRequest, ScriptedTurn, batch, call, fail, text

__all__ = ["ScriptedProvider", "ScriptedRequest", "ScriptedTurn", "batch", "call", "fail", "text"]
