"""Plugins: bundles of tools, prompt text, per-turn view entries, hooks and guardrails.

The protocol and the per-run instance live in :mod:`lovia.plugins.base`; the built-in plugins in
their own modules (``todo``, ``skills``, ``memory``, ``subagents``, and ``mcp``, which is imported
on its own because it needs the optional ``mcp`` package). Everything is re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .base import Plugin, PluginInstance, ViewInjector, setup_plugin

if TYPE_CHECKING:
    from .memory import (
        Doc,
        Embedder,
        FileNotesStore,
        Fusable,
        Hit,
        HybridIndex,
        Index,
        KeywordIndex,
        Memory,
        NotesStore,
        OpenAIEmbedder,
        VectorIndex,
    )
    from .skills import (
        DirectorySkillSource,
        Skill,
        SkillCatalog,
        SkillFilter,
        SkillMetadata,
        SkillNotFoundError,
        Skills,
        SkillsError,
        SkillSource,
    )
    from .subagents import ChildSpec, DeliverFn, RunChildFn, SubagentReport, Subagents
    from .todo import Todo, TodoItem, TodoList, TodoStatus, render_todos, todos_from_entries

_LAZY = {
    "ChildSpec": ".subagents",
    "DeliverFn": ".subagents",
    "DirectorySkillSource": ".skills",
    "Doc": ".memory",
    "Embedder": ".memory",
    "FileNotesStore": ".memory",
    "Fusable": ".memory",
    "Hit": ".memory",
    "HybridIndex": ".memory",
    "Index": ".memory",
    "KeywordIndex": ".memory",
    "Memory": ".memory",
    "NotesStore": ".memory",
    "OpenAIEmbedder": ".memory",
    "RunChildFn": ".subagents",
    "Skill": ".skills",
    "SkillCatalog": ".skills",
    "SkillFilter": ".skills",
    "SkillMetadata": ".skills",
    "SkillNotFoundError": ".skills",
    "SkillSource": ".skills",
    "Skills": ".skills",
    "SkillsError": ".skills",
    "SubagentReport": ".subagents",
    "Subagents": ".subagents",
    "Todo": ".todo",
    "TodoItem": ".todo",
    "TodoList": ".todo",
    "TodoStatus": ".todo",
    "VectorIndex": ".memory",
    "render_todos": ".todo",
    "todos_from_entries": ".todo",
}

__all__ = [
    "ChildSpec",
    "DeliverFn",
    "DirectorySkillSource",
    "Doc",
    "Embedder",
    "FileNotesStore",
    "Fusable",
    "Hit",
    "HybridIndex",
    "Index",
    "KeywordIndex",
    "Memory",
    "NotesStore",
    "OpenAIEmbedder",
    "Plugin",
    "PluginInstance",
    "RunChildFn",
    "Skill",
    "SkillCatalog",
    "SkillFilter",
    "SkillMetadata",
    "SkillNotFoundError",
    "SkillSource",
    "Skills",
    "SkillsError",
    "SubagentReport",
    "Subagents",
    "Todo",
    "TodoItem",
    "TodoList",
    "TodoStatus",
    "VectorIndex",
    "ViewInjector",
    "render_todos",
    "setup_plugin",
    "todos_from_entries",
]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
