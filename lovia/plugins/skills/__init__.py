"""Skills: instruction bundles the model loads on demand (index first, body and files when needed)."""

from __future__ import annotations

from .catalog import SkillCatalog, SkillFilter
from .model import Skill, SkillMetadata, SkillNotFoundError, SkillsError
from .plugin import Skills
from .source import DirectorySkillSource, SkillSource

__all__ = [
    "DirectorySkillSource",
    "Skill",
    "SkillCatalog",
    "SkillFilter",
    "SkillMetadata",
    "SkillNotFoundError",
    "SkillSource",
    "Skills",
    "SkillsError",
]
