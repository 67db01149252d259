"""The skill directories of the default agent, and what each one contributes.

The list is ordered: on a duplicate skill name the earlier directory wins, the later one is
reported as shadowed. A directory that does not exist is skipped (a stale entry never stops the
server); a skill whose ``SKILL.md`` does not parse is reported as a problem and skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...plugins.skills.model import SkillsError
from ...plugins.skills.source import SKILL_FILE, DirectorySkillSource
from .schema import DEFAULT_SKILLS_DIR, USER_SKILLS_DIR, SkillsConfig

__all__ = [
    "RootStatus",
    "SkillEntry",
    "SkillProblem",
    "SkillRoot",
    "resolve_skills_dirs",
    "scan_skills_status",
    "skill_roots",
]


@dataclass(frozen=True, slots=True)
class SkillRoot:
    """One configured directory: ``kind`` is ``project``, ``user`` or ``custom``."""

    kind: str
    path: str
    resolved: Path
    exists: bool


def _kind(path: str) -> str:
    if path == DEFAULT_SKILLS_DIR:
        return "project"
    if path == USER_SKILLS_DIR:
        return "user"
    return "custom"


def skill_roots(skills: SkillsConfig) -> list[SkillRoot]:
    """The configured directories, resolved (``~`` expanded, relative to the current folder)."""
    roots: list[SkillRoot] = []
    for path in skills.dirs:
        resolved = Path(os.path.abspath(os.path.expanduser(path)))
        roots.append(SkillRoot(_kind(path), path, resolved, resolved.is_dir()))
    return roots


def resolve_skills_dirs(skills: SkillsConfig | None) -> list[Path]:
    """The directories that exist, in order (the default list when ``skills`` is ``None``)."""
    return [r.resolved for r in skill_roots(skills or SkillsConfig()) if r.exists]


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """A skill found in a directory; ``shadowed`` when an earlier directory has the same name."""

    name: str
    description: str
    shadowed: bool = False


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A skill folder that could not be read (``dir`` is the folder, ``error`` what is wrong)."""

    dir: str
    error: str


@dataclass(slots=True)
class RootStatus:
    """What one configured directory contributes."""

    kind: str
    path: str
    resolved: str
    exists: bool
    skills: list[SkillEntry] = field(default_factory=list)
    problems: list[SkillProblem] = field(default_factory=list)


def scan_skills_status(skills: SkillsConfig) -> list[RootStatus]:
    """Scan every configured directory now, the way the skills plugin does."""
    seen: set[str] = set()
    statuses: list[RootStatus] = []
    for root in skill_roots(skills):
        status = RootStatus(root.kind, root.path, str(root.resolved), root.exists)
        statuses.append(status)
        if not root.exists:
            continue
        reader = DirectorySkillSource(root.resolved)
        for entry in sorted(root.resolved.iterdir()):
            md = entry / SKILL_FILE
            if not entry.is_dir() or not md.is_file():
                continue
            try:
                name, description, _extra = reader._read_meta(md, entry.name)  # the plugin's own parser
            except SkillsError as exc:
                status.problems.append(SkillProblem(str(entry), exc.message))
                continue
            status.skills.append(SkillEntry(name, description, shadowed=name in seen))
            seen.add(name)
    return statuses
