"""lovia: an agent runtime whose spine is durable state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import events
from ._lazy import lazy_exports
from ._logging import enable_logging
from .agent import Agent
from .context.base import ContextPolicy, NoopContextPolicy
from .context.compaction import Compaction
from .exceptions import (
    BudgetExceeded,
    ContextOverflowError,
    GuardrailTripped,
    InvalidToolArguments,
    LoviaError,
    MaxTurnsExceeded,
    MCPError,
    OutputValidationError,
    ProviderError,
    RunBusy,
    RunCancelled,
    StoreError,
    ToolError,
    UserError,
)
from .handoff import Handoff
from .hooks import AgentHooks
from .messages import FilePart, ImagePart, Message, TextPart, Usage, assistant, system, user
from .providers.base import ModelSettings, Provider
from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from .result import RunResult
from .run_context import RunContext
from .runner import Runner
from .tools import Tool, tool

if TYPE_CHECKING:
    from .checkpointer import Checkpointer, CheckpointOptions, RunHead, RunSnapshot
    from .context.stores import FileResultStore, InMemoryResultStore, ResultStore
    from .handle import RunHandle
    from .plugins import (
        Memory,
        OpenAIEmbedder,
        Plugin,
        PluginInstance,
        SkillNotFoundError,
        Skills,
        SkillsError,
        Subagents,
        Todo,
    )
    from .providers import AnthropicProvider, OpenAIChatProvider, model_from_env
    from .session import Segment, Session
    from .stores import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
    from .transcript import TranscriptEntry

# Served on first use (``lovia.X`` and ``from lovia import X`` both work): a run that does not
# touch them does not pay for importing them.
_LAZY = {
    "AnthropicProvider": ".providers.anthropic",
    "CheckpointOptions": ".checkpointer",
    "Checkpointer": ".checkpointer",
    "FileResultStore": ".context.stores",
    "InMemoryCheckpointer": ".stores.memory",
    "InMemoryResultStore": ".context.stores",
    "InMemorySession": ".stores.memory",
    "Memory": ".plugins.memory",
    "OpenAIChatProvider": ".providers.openai_chat",
    "OpenAIEmbedder": ".plugins.memory",
    "Plugin": ".plugins.base",
    "PluginInstance": ".plugins.base",
    "ResultStore": ".context.stores",
    "RunHandle": ".handle",
    "RunHead": ".checkpointer",
    "RunSnapshot": ".checkpointer",
    "SQLiteCheckpointer": ".stores.sqlite",
    "SQLiteSession": ".stores.sqlite",
    "Segment": ".session",
    "Session": ".session",
    "SkillNotFoundError": ".plugins.skills",
    "Skills": ".plugins.skills",
    "SkillsError": ".plugins.skills",
    "Subagents": ".plugins.subagents",
    "Todo": ".plugins.todo",
    "TranscriptEntry": ".transcript",
    "model_from_env": ".providers.registry",
}

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentHooks",
    "AnthropicProvider",
    "BudgetExceeded",
    "CancelToken",
    "CheckpointOptions",
    "Checkpointer",
    "Compaction",
    "ContextOverflowError",
    "ContextPolicy",
    "FilePart",
    "FileResultStore",
    "GuardrailTripped",
    "Handoff",
    "ImagePart",
    "InMemoryCheckpointer",
    "InMemoryResultStore",
    "InMemorySession",
    "InvalidToolArguments",
    "LoviaError",
    "MCPError",
    "Mailbox",
    "MaxTurnsExceeded",
    "Memory",
    "Message",
    "ModelSettings",
    "NoopContextPolicy",
    "OpenAIChatProvider",
    "OpenAIEmbedder",
    "OutputValidationError",
    "Plugin",
    "PluginInstance",
    "Provider",
    "ProviderError",
    "ResultStore",
    "RetryPolicy",
    "RunBudget",
    "RunBusy",
    "RunCancelled",
    "RunContext",
    "RunHandle",
    "RunHead",
    "RunResult",
    "RunSnapshot",
    "Runner",
    "SQLiteCheckpointer",
    "SQLiteSession",
    "Segment",
    "Session",
    "SkillNotFoundError",
    "Skills",
    "SkillsError",
    "StoreError",
    "Subagents",
    "TextPart",
    "Todo",
    "Tool",
    "ToolError",
    "TranscriptEntry",
    "Usage",
    "UserError",
    "__version__",
    "assistant",
    "enable_logging",
    "events",
    "model_from_env",
    "system",
    "tool",
    "user",
]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
