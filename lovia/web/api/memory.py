"""The Memory notes of a served agent over HTTP: read, replace, and dream them now.

``GET`` / ``PUT /api/memory?agent=`` and ``POST /api/memory/dream?agent=`` work on the
:class:`~lovia.plugins.memory.Memory` plugin of the named agent (the default agent when
``agent`` is left out). ``used`` counts characters the way the prompt's meter does: each note
plus three for its bullet and line break.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter

from ...agent import Agent
from ...plugins.memory import Memory
from ...plugins.memory.plugin import normalize_facts, parse_bullets
from ..errors import ApiRoute, WebError
from ..schemas import MAX_NOTES_CHARS, MemoryDreamResult, MemoryNotes, MemoryUpdate
from .deps import RouterDeps

__all__ = ["MemoryDreamResult", "MemoryNotes", "MemoryUpdate", "build_memory_router", "memory_plugin", "notes_used"]

MAX_BODY_CHARS = MAX_NOTES_CHARS
"""The longest notes body ``PUT /api/memory`` reads (longer: 422 before any budget check)."""


def memory_plugin(agent: Agent[Any]) -> Memory | None:
    """The first :class:`~lovia.plugins.memory.Memory` plugin on ``agent``, or ``None``."""
    for plugin in agent.plugins or []:
        if isinstance(plugin, Memory):
            return plugin
    return None


def notes_used(facts: list[str]) -> int:
    """The characters ``facts`` take in the prompt (each note, its bullet and its line break)."""
    return sum(len(f) + 3 for f in facts)


def _resolve(deps: RouterDeps, agent: str | None) -> tuple[str, Agent[Any], Memory]:
    if not agent and len(deps.agents) > 1:
        raise WebError(
            400,
            "invalid_request",
            f"{len(deps.agents)} agents are served: say whose notes with ?agent=",
            hint=f"use one of: {', '.join(sorted(deps.agents))} (GET /api/agents lists them)",
        )
    name = agent or deps.default_agent
    served = deps.agents.get(name)
    if served is None:
        raise WebError(
            404,
            "agent_not_found",
            f"no served agent named {name!r}",
            hint=f"use one of: {', '.join(sorted(deps.agents))} (GET /api/agents lists them)",
        )
    mem = memory_plugin(served)
    if mem is None:
        raise WebError(
            404,
            "feature_unavailable",
            f"agent {name!r} has no Memory plugin",
            hint="add plugins=[Memory('./.lovia/memory')] to the agent, or pick another with ?agent=",
        )
    return name, served, mem


async def _notes(mem: Memory) -> MemoryNotes:
    body = await mem.notes_body()
    return MemoryNotes(
        content=body, used=notes_used(parse_bullets(body)), budget=mem.notes_budget, dreamed_at=mem.dreamed_at()
    )


def build_memory_router(deps: RouterDeps) -> APIRouter:
    """``GET`` / ``PUT /api/memory`` and ``POST /api/memory/dream``, bound to ``deps``."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)

    @router.get("/memory")
    async def read_memory(agent: str | None = None) -> MemoryNotes:
        _name, _served, mem = _resolve(deps, agent)
        return await _notes(mem)

    @router.put("/memory")
    async def replace_memory(body: MemoryUpdate, agent: str | None = None) -> MemoryNotes:
        _name, _served, mem = _resolve(deps, agent)
        month = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m")
        used = notes_used(normalize_facts(parse_bullets(body.content), month))
        if used > mem.notes_budget:
            raise WebError(
                413,
                "payload_too_large",
                f"these notes take {used} characters; the budget is {mem.notes_budget}",
                hint="shorten or drop some notes (undated ones gain a [YYYY-MM] stamp), dream them with"
                " POST /api/memory/dream, or raise Memory(notes_budget=...)",
            )
        await mem.replace_notes(body.content)
        return await _notes(mem)

    @router.post("/memory/dream")
    async def dream_memory(agent: str | None = None) -> MemoryDreamResult:
        _name, served, mem = _resolve(deps, agent)
        model = mem.model if mem.model is not None else served.model
        if model is None:
            raise WebError(
                501,
                "feature_unavailable",
                "dreaming needs a model and neither the Memory plugin nor its agent has one",
                hint="pass Memory(model=...) or give the agent a model",
            )
        before, after = await mem.dream(model)
        notes = await _notes(mem)
        return MemoryDreamResult(**notes.model_dump(), before=before, after=after)

    return router
