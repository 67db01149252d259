"""The command guard: a lexical pass that pulls path claims out of a command line.

Redirect targets count as writes, path-looking arguments as reads. It is advisory and
one-sided: it can add restrictions (a denied path named in a command denies the command),
never loosen the static command rules. ``python -c`` payloads and ``$(...)`` are invisible to it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from .policy import FileOp, split_command

__all__ = ["extract_path_claims"]

_WRITE_OPS = {">", ">>", "&>", "&>>", ">|", ">>|"}
_READ_OPS = {"<"}
_SKIP_OPS = {">&", "<&", "&", "&&"}


def _looks_like_path(word: str) -> bool:
    if not word or word.startswith("-") or "://" in word:
        return "=" in word and _looks_like_path(word.split("=", 1)[1]) if word.startswith("--") else False
    return "/" in word or word.startswith((".", "~")) or "." in word.strip(".")


def _words(segment: str) -> list[str]:
    try:
        lexer = shlex.shlex(segment, posix=True, punctuation_chars="<>&|")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace words
        return segment.split()


def extract_path_claims(command: str, *, exists: Callable[[str], bool] | None = None) -> list[tuple[FileOp, str]]:
    """``(op, path)`` pairs named by ``command``: redirect targets as writes, path-like words as reads.

    ``exists`` (optional) also turns bare words that name an existing file (``cat notes``) into reads.
    """
    claims: list[tuple[FileOp, str]] = []
    for segment in split_command(command):
        words = _words(segment)
        for i, word in enumerate(words):
            prev = words[i - 1] if i else ""
            if prev in _WRITE_OPS:
                claims.append(("write", word))
            elif prev in _READ_OPS:
                claims.append(("read", word))
            elif prev in _SKIP_OPS or word in _WRITE_OPS or word in _READ_OPS or word in _SKIP_OPS:
                continue
            elif i > 0 and (
                _looks_like_path(word) or (exists is not None and not word.startswith("-") and exists(word))
            ):
                claims.append(("read", word.split("=", 1)[1] if word.startswith("--") else word))
    return [(op, p) for op, p in claims if p and p != "/dev/null"]
