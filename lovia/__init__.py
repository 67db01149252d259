"""lovia: an agent runtime whose spine is durable state."""

from __future__ import annotations

from . import events
from ._logging import enable_logging
from .agent import Agent
from .checkpointer import Checkpointer, CheckpointOptions, RunHead, RunSnapshot
from .context import Compaction, ContextPolicy, FileResultStore, InMemoryResultStore, NoopContextPolicy, ResultStore
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
from .handle import RunHandle
from .handoff import Handoff
from .hooks import AgentHooks
from .messages import FilePart, ImagePart, Message, TextPart, Usage, assistant, system, user
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
from .providers import AnthropicProvider, ModelSettings, OpenAIChatProvider, Provider, model_from_env
from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from .result import RunResult
from .run_context import RunContext
from .runner import Runner
from .session import Segment, Session
from .stores import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
from .tools import Tool, tool
from .transcript import TranscriptEntry

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
