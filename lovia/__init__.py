"""lovia: an agent runtime whose spine is durable state."""

from __future__ import annotations

from . import events
from ._logging import enable_logging
from .agent import Agent
from .checkpointer import Checkpointer, CheckpointOptions, RunHead, RunSnapshot
from .context import ContextPolicy
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
from .providers import ModelSettings, Provider
from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from .result import RunResult
from .run_context import RunContext
from .runner import Runner
from .session import Segment, Session
from .tools import Tool, tool
from .transcript import TranscriptEntry

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentHooks",
    "BudgetExceeded",
    "CancelToken",
    "CheckpointOptions",
    "Checkpointer",
    "ContextOverflowError",
    "ContextPolicy",
    "FilePart",
    "GuardrailTripped",
    "Handoff",
    "ImagePart",
    "InvalidToolArguments",
    "LoviaError",
    "MCPError",
    "Mailbox",
    "MaxTurnsExceeded",
    "Message",
    "ModelSettings",
    "OutputValidationError",
    "Provider",
    "ProviderError",
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
    "Segment",
    "Session",
    "StoreError",
    "TextPart",
    "Tool",
    "ToolError",
    "TranscriptEntry",
    "Usage",
    "UserError",
    "__version__",
    "assistant",
    "enable_logging",
    "events",
    "system",
    "tool",
    "user",
]
