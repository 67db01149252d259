"""The bundled context-window table, keyed by the host that serves the model.

Internal. A window is a fact about one deployment, not about a model name: ``gpt-4.1`` on
api.openai.com has a 1M window, the ``gpt-4.1`` a local server re-exposes may have 8K. So the
table answers only for the vendors' own hosts; any other host gets ``None`` and relies on what its
endpoint reports (``/models``, or the limit named in an overflow error).

Names match exactly or by the longest listed prefix, so dated snapshots
(``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``) find their family.
"""

from __future__ import annotations

__all__ = ["known_window"]

_M = 1_048_576

_TABLE: dict[str, dict[str, int]] = {
    "api.openai.com": {
        "gpt-5": 400_000,
        "gpt-4.1": 1_047_576,
        "gpt-4o": 128_000,
        "gpt-4-turbo": 128_000,
        "gpt-4": 8_192,
        "gpt-3.5-turbo": 16_385,
        "o1": 200_000,
        "o1-mini": 128_000,
        "o3": 200_000,
        "o3-mini": 200_000,
        "o4-mini": 200_000,
        "codex-mini": 200_000,
    },
    "api.anthropic.com": {
        "claude-3": 200_000,
        "claude-3-5": 200_000,
        "claude-3-7": 200_000,
        "claude-sonnet-4": 200_000,
        "claude-opus-4": 200_000,
        "claude-haiku-4": 200_000,
    },
    "api.deepseek.com": {
        "deepseek-chat": 128_000,
        "deepseek-reasoner": 128_000,
    },
    "generativelanguage.googleapis.com": {
        "gemini-1.5-pro": 2_097_152,
        "gemini-1.5-flash": _M,
        "gemini-2.0-flash": _M,
        "gemini-2.5-pro": _M,
        "gemini-2.5-flash": _M,
        "gemini-3": _M,
    },
}


def known_window(host: str | None, model: str) -> int | None:
    """The bundled window for ``model`` as served by ``host``, or ``None`` when not listed."""
    table = _TABLE.get((host or "").lower())
    if not table:
        return None
    name = model.lower().removeprefix("models/")
    if name in table:
        return table[name]
    best: str | None = None
    for prefix in table:
        if name.startswith(prefix + "-") or name.startswith(prefix + "."):
            if best is None or len(prefix) > len(best):
                best = prefix
    return table[best] if best is not None else None
