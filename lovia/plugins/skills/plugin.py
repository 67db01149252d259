"""The ``Skills`` plugin: the catalog's index in the system prompt and its two tools."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...exceptions import UserError
from ..base import PluginInstance
from .catalog import SkillCatalog, SkillFilter
from .source import SkillSource, as_source

if TYPE_CHECKING:
    from ...run_context import RunContext

__all__ = ["Skills"]


class Skills:
    """``Skills("./skills", ...)``: directories, :class:`SkillSource` objects, or one :class:`SkillCatalog`.

    The index is rendered once per run (a skill added meanwhile is loadable at once, and listed
    from the next run on).
    """

    name: str

    def __init__(
        self,
        *sources: str | Path | SkillSource | SkillCatalog,
        usage_rules: str | None = None,
        filter: SkillFilter | None = None,
        name: str = "skills",
    ) -> None:
        if not sources:
            raise UserError("Skills() needs at least one directory or source", hint='Skills("./skills")')
        catalogs = [s for s in sources if isinstance(s, SkillCatalog)]
        if catalogs:
            if len(sources) > 1:
                raise UserError("Skills(): pass one SkillCatalog alone", hint="combine sources inside the catalog")
            if usage_rules is not None or filter is not None:
                raise UserError(
                    "Skills(catalog) does not take usage_rules= or filter=",
                    hint="configure them on the SkillCatalog",
                )
            self.catalog = catalogs[0]
        else:
            plain = [as_source(s) for s in sources if not isinstance(s, SkillCatalog)]
            self.catalog = SkillCatalog.combine(plain, usage_rules=usage_rules, filter=filter)
        self.name = name

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Render the index for this run and hand out the tools."""
        text = await self.catalog.instructions()
        return PluginInstance(tools=self.catalog.tools(), instructions=text or None)
