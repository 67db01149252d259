"""The workspace ACL: ``allow`` / ``ask`` / ``deny`` for paths and commands.

Path decisions: ``denied_paths`` first, then the first matching :class:`PathRule`, then the
mode defaults. Command decisions: every segment of a compound command is judged on its own
(first matching :class:`CommandRule`, else the decider, else ``shell_default``) and the most
restrictive verdict wins.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..exceptions import UserError

__all__ = ["CommandDecider", "CommandRule", "Decision", "FileOp", "PathRule", "WorkspacePolicy", "merge_decisions"]

Decision = Literal["allow", "ask", "deny"]
FileOp = Literal["read", "write"]
CommandDecider = Callable[[str], "Decision | None"]
"""``(command_segment) -> decision | None``: consulted after the rules; ``None`` falls through."""

_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_SEGMENT_SPLIT = re.compile(r"\|\||&&|;|\n|(?<![>|])\|(?![|&])|\|&|(?<![<>&])&(?![>&])")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def _check_decision(value: object, where: str) -> None:
    if value not in _RANK:
        raise UserError(f"{where}: {value!r} is not a decision", hint="use 'allow', 'ask' or 'deny'")


def merge_decisions(*decisions: Decision) -> Decision:
    """The most restrictive of ``decisions`` (``allow`` when there are none)."""
    worst: Decision = "allow"
    for d in decisions:
        if _RANK[d] > _RANK[worst]:
            worst = d
    return worst


@dataclass(frozen=True)
class CommandRule:
    """``pattern`` matches a command segment by word-boundary prefix (``"git push"`` ~ ``git push origin``)."""

    pattern: str
    action: Decision

    def __post_init__(self) -> None:
        _check_decision(self.action, f"CommandRule({self.pattern!r})")
        if not self.pattern.split():
            raise UserError("a CommandRule needs a non-empty pattern", hint='e.g. CommandRule("pytest", "allow")')

    def matches(self, segment: str) -> bool:
        """Whether the (whitespace-normalised) segment starts with this pattern at a word boundary."""
        words, want = segment.split(), self.pattern.split()
        return words[: len(want)] == want


@dataclass(frozen=True)
class PathRule:
    """A glob and the decision it carries for the listed operations.

    Three forms: absolute or ``~`` (the path and its subtree), containing ``/`` (relative to the
    workspace root), or bare (``.env*``: any path segment, inside or outside the root).
    """

    pattern: str
    action: Decision
    ops: frozenset[FileOp] = frozenset({"read", "write"})

    def __post_init__(self) -> None:
        _check_decision(self.action, f"PathRule({self.pattern!r})")
        object.__setattr__(self, "ops", frozenset(self.ops))
        bad = set(self.ops) - {"read", "write"}
        if bad or not self.ops:
            raise UserError(f"PathRule({self.pattern!r}): ops must be 'read' and/or 'write'", hint='ops={"read"}')

    def matches(self, *, rel: str | None, abs_posix: str, fold_case: bool = False) -> bool:
        """Whether this rule addresses the resolved path."""
        return path_pattern_matches(self.pattern, rel=rel, abs_posix=abs_posix, fold_case=fold_case)


def _expand(pattern: str) -> str:
    expanded = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    return expanded.rstrip("/") or "/"


def _prefixes(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    lead = "/" if path.startswith("/") else ""
    return [lead + "/".join(parts[: i + 1]) for i in range(len(parts))]


def path_pattern_matches(pattern: str, *, rel: str | None, abs_posix: str, fold_case: bool = False) -> bool:
    """Match one policy glob against a resolved path (see :class:`PathRule` for the forms)."""

    def eq(name: str, pat: str) -> bool:
        if fold_case:
            return fnmatch.fnmatchcase(name.casefold(), pat.casefold())
        return fnmatch.fnmatchcase(name, pat)

    if pattern.startswith(("/", "~")):
        pat = _expand(pattern)
        return any(eq(prefix, pat) or eq(prefix, pat.removesuffix("/**")) for prefix in _prefixes(abs_posix))
    if "/" in pattern.strip("/"):
        if rel is None:
            return False
        pat = pattern.strip("/").removeprefix("./")
        # "dir/**" covers the directory itself too: listing it would show what is inside.
        return any(eq(prefix, pat) or eq(prefix, pat.removesuffix("/**")) for prefix in _prefixes(rel))
    name = pattern.strip("/")
    segments = [s for s in (rel if rel is not None else abs_posix).split("/") if s and s != "."]
    return any(eq(seg, name) for seg in segments)


def split_command(command: str) -> list[str]:
    """Segments of a compound command (split on ``&&``, ``||``, ``;``, ``|``, ``&``, newlines)."""
    return [seg.strip() for seg in _SEGMENT_SPLIT.split(command) if seg.strip()]


def _strip_env(segment: str) -> str:
    words = segment.split()
    while words and _ENV_ASSIGN.match(words[0]):
        words.pop(0)
    return " ".join(words)


@dataclass(frozen=True)
class WorkspacePolicy:
    """What a workspace session allows. Build one with the mode presets or field by field."""

    write: Decision = "allow"
    read_outside: Decision = "deny"
    write_outside: Decision = "deny"
    path_rules: tuple[PathRule, ...] = ()
    denied_paths: tuple[str, ...] = ()
    allow_shell: bool = True
    shell_default: Decision = "ask"
    command_rules: tuple[CommandRule, ...] = ()
    command_decider: CommandDecider | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("write", "read_outside", "write_outside", "shell_default"):
            _check_decision(getattr(self, name), f"WorkspacePolicy.{name}")
        object.__setattr__(self, "path_rules", tuple(self.path_rules))
        object.__setattr__(self, "denied_paths", tuple(self.denied_paths))
        object.__setattr__(self, "command_rules", tuple(self.command_rules))
        for rule in self.path_rules:
            if not isinstance(rule, PathRule):
                raise UserError(f"path_rules takes PathRule values, got {rule!r}", hint='PathRule(".git/**", "deny")')
        for rule in self.command_rules:  # type: ignore[assignment]
            if not isinstance(rule, CommandRule):
                raise UserError(
                    f"command_rules takes CommandRule values, got {rule!r}", hint='CommandRule("pytest", "allow")'
                )

    # ------------------------------------------------------------------ presets

    @classmethod
    def readonly(cls, *, denied_paths: tuple[str, ...] = (), path_rules: tuple[PathRule, ...] = ()) -> WorkspacePolicy:
        """Reads inside the root only; no writes, no shell."""
        return cls(
            write="deny",
            read_outside="deny",
            write_outside="deny",
            path_rules=path_rules,
            denied_paths=denied_paths,
            allow_shell=False,
            shell_default="deny",
        )

    @classmethod
    def coding(
        cls,
        *,
        command_rules: tuple[CommandRule, ...] = (),
        denied_paths: tuple[str, ...] = (),
        path_rules: tuple[PathRule, ...] = (),
        command_decider: CommandDecider | None = None,
    ) -> WorkspacePolicy:
        """Writes inside the root; reads outside and every command ask first; writes outside are denied."""
        return cls(
            write="allow",
            read_outside="ask",
            write_outside="deny",
            path_rules=path_rules,
            denied_paths=denied_paths,
            allow_shell=True,
            shell_default="ask",
            command_rules=command_rules,
            command_decider=command_decider,
        )

    @classmethod
    def trusted(
        cls,
        *,
        command_rules: tuple[CommandRule, ...] = (),
        denied_paths: tuple[str, ...] = (),
        path_rules: tuple[PathRule, ...] = (),
        command_decider: CommandDecider | None = None,
    ) -> WorkspacePolicy:
        """Reads anywhere, writes inside, commands run; only writes outside the root ask."""
        return cls(
            write="allow",
            read_outside="allow",
            write_outside="ask",
            path_rules=path_rules,
            denied_paths=denied_paths,
            allow_shell=True,
            shell_default="allow",
            command_rules=command_rules,
            command_decider=command_decider,
        )

    # ------------------------------------------------------------------ decisions

    @property
    def can_write(self) -> bool:
        """Whether any write can ever be allowed (decides if write tools are offered)."""
        return (
            self.write != "deny"
            or self.write_outside != "deny"
            or any(r.action != "deny" and "write" in r.ops for r in self.path_rules)
        )

    def is_denied(self, *, rel: str | None, abs_posix: str) -> bool:
        """Whether a ``denied_paths`` glob covers the path (case-insensitively: no case tricks)."""
        return any(path_pattern_matches(p, rel=rel, abs_posix=abs_posix, fold_case=True) for p in self.denied_paths)

    def decide_path(self, *, rel: str | None, abs_posix: str, op: FileOp) -> Decision:
        """The decision for one resolved path (``rel`` is ``None`` outside the root)."""
        if self.is_denied(rel=rel, abs_posix=abs_posix):
            return "deny"
        for rule in self.path_rules:
            if op in rule.ops and rule.matches(rel=rel, abs_posix=abs_posix):
                return rule.action
        if rel is not None:
            return "allow" if op == "read" else self.write
        return self.read_outside if op == "read" else self.write_outside

    def decide_segment(self, segment: str) -> Decision:
        """The static decision for one command segment."""
        if not self.allow_shell:
            return "deny"
        words = _strip_env(segment)
        for rule in self.command_rules:
            if rule.matches(words) or rule.matches(segment):
                return rule.action
        if self.command_decider is not None:
            verdict = self.command_decider(segment)
            if verdict is not None:
                _check_decision(verdict, "command_decider")
                return verdict
        return self.shell_default

    def decide_command(self, command: str) -> Decision:
        """The static decision for a whole command line (most restrictive segment wins)."""
        if not self.allow_shell:
            return "deny"
        segments = split_command(command)
        if not segments:
            return "deny"
        return merge_decisions(*(self.decide_segment(s) for s in segments))
