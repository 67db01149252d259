"""What a skill is: its metadata (the index line), its body and files, and the errors of the layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...exceptions import LoviaError

__all__ = ["MAX_FILE_CHARS", "Skill", "SkillMetadata", "SkillNotFoundError", "SkillsError"]

MAX_FILE_CHARS = 100_000
"""Longest text a skill tool returns (longer content is cut with a marker)."""
MAX_FILE_BYTES = 2_000_000
"""Largest file a skill may ask to read (a bigger one is refused, not loaded)."""


class SkillsError(LoviaError):
    """A failure of the skill layer (bad skill, unreadable file, path outside the skill)."""

    def __init__(
        self, message: str, *, skill_name: str | None = None, path: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.skill_name = skill_name
        self.path = path


class SkillNotFoundError(SkillsError):
    """No visible skill has this name; ``available`` lists the names that are."""

    def __init__(self, name: str, *, available: Sequence[str] = ()) -> None:
        names = ", ".join(available) if available else "none"
        super().__init__(
            f"no skill named {name!r}",
            skill_name=name,
            hint=f"available skills: {names}",
        )
        self.available = list(available)


@dataclass(frozen=True)
class SkillMetadata:
    """The part of a skill that is always in the prompt: name, description, other front matter."""

    name: str
    description: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Skill:
    """A loaded skill: metadata plus the ``SKILL.md`` body and the directory holding its files."""

    name: str
    description: str
    body: str
    path: Path | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metadata(self) -> SkillMetadata:
        """The index view of this skill."""
        return SkillMetadata(self.name, self.description, self.extra)

    def read_file(self, relpath: str) -> str:
        """Read a file of this skill as text; the path must stay inside the skill's directory."""
        if self.path is None:
            raise SkillsError(
                f"skill {self.name!r} has no files", skill_name=self.name, hint="use load_skill for its body"
            )
        root = self.path.resolve()
        if not relpath or Path(relpath).is_absolute():
            raise SkillsError(
                f"{relpath!r} is not a path inside the skill",
                skill_name=self.name,
                path=relpath,
                hint="pass a path relative to the skill's directory, e.g. references/table.md",
            )
        target = (root / relpath).resolve()
        if target != root and root not in target.parents:
            raise SkillsError(
                f"{relpath!r} leaves the skill's directory",
                skill_name=self.name,
                path=relpath,
                hint="only files inside the skill's own directory can be read",
            )
        if not target.is_file():
            raise SkillsError(
                f"skill {self.name!r} has no file {relpath!r}",
                skill_name=self.name,
                path=relpath,
                hint="check the path the skill's instructions mention",
            )
        if target.stat().st_size > MAX_FILE_BYTES:
            raise SkillsError(
                f"{relpath!r} is larger than {MAX_FILE_BYTES} bytes",
                skill_name=self.name,
                path=relpath,
                hint="split the file, or read it with a workspace tool",
            )
        data = target.read_bytes()
        if b"\x00" in data[:8192]:
            raise SkillsError(
                f"{relpath!r} is a binary file",
                skill_name=self.name,
                path=relpath,
                hint="only text files can be read through a skill",
            )
        return data.decode("utf-8", errors="replace")
