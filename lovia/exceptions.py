"""Every error lovia raises on purpose.

All of them derive from :class:`LoviaError` and carry an optional ``.hint`` naming the next step::

    LoviaError
    ├── UserError                 configuration or misuse (raised at construction when possible)
    ├── ProviderError             a model endpoint failed: .vendor .model .status_code .retryable
    ├── ContextOverflowError      the prompt did not fit: .reported_window (not a ProviderError)
    ├── ToolError                 a shaped tool failure the model gets to see
    │   └── InvalidToolArguments  model-supplied arguments failed validation
    ├── OutputValidationError     the final answer did not match output_type: .raw .output_type_name
    ├── MaxTurnsExceeded          the run used its max_turns
    ├── BudgetExceeded            a RunBudget limit was reached
    ├── RunCancelled              the cancel token fired
    ├── GuardrailTripped          an input or output guardrail vetoed the run
    ├── RunBusy                   another live worker holds the run's lease
    ├── StoreError                a store could not do what was asked
    │   ├── CorruptRecordError    a stored row could not be decoded: .session_id .run_id
    │   ├── SchemaTooNewError     the database was migrated by a newer lovia
    │   └── LeaseLostError        this worker's lease was taken over (its write was refused)
    └── MCPError                  an MCP server failed: .tool_name

``asyncio.CancelledError`` is never wrapped: task cancellation always propagates as itself.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "ContextOverflowError",
    "CorruptRecordError",
    "GuardrailTripped",
    "InvalidToolArguments",
    "LeaseLostError",
    "LoviaError",
    "MCPError",
    "MaxTurnsExceeded",
    "OutputValidationError",
    "ProviderError",
    "RunBusy",
    "RunCancelled",
    "SchemaTooNewError",
    "StoreError",
    "ToolError",
    "UserError",
]


class LoviaError(Exception):
    """Root of every lovia error; ``hint`` says what to do next (may be ``None``).

    Extra keyword arguments become attributes of the error (structured detail for handlers).
    """

    def __init__(self, message: str = "", *, hint: str | None = None, **extra: object) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        for key, value in extra.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message


class UserError(LoviaError):
    """The caller configured or used lovia wrongly."""


class ProviderError(LoviaError):
    """A model endpoint returned an error or the connection to it failed."""

    def __init__(
        self,
        message: str = "",
        *,
        vendor: str | None = None,
        model: str | None = None,
        status_code: int | None = None,
        retryable: bool | None = None,
        hint: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.vendor = vendor
        self.model = model
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the endpoint asked us to wait (its ``Retry-After`` header), when it said."""


class ContextOverflowError(LoviaError):
    """The request exceeded the model's context window."""

    def __init__(
        self,
        message: str = "",
        *,
        reported_window: int | None = None,
        vendor: str | None = None,
        model: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.reported_window = reported_window
        self.vendor = vendor
        self.model = model


class ToolError(LoviaError):
    """Raise from a tool to give the model a shaped error message (and an optional hint)."""

    def __init__(
        self, message: str = "", *, tool_name: str | None = None, hint: str | None = None, **extra: object
    ) -> None:
        super().__init__(message, hint=hint, **extra)
        self.tool_name = tool_name


class InvalidToolArguments(ToolError):
    """The model's arguments for a tool were not valid JSON or failed validation."""


class OutputValidationError(LoviaError):
    """The model's final answer could not be parsed as the requested output type."""

    def __init__(
        self,
        message: str = "",
        *,
        raw: str | None = None,
        output_type_name: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.raw = raw
        self.output_type_name = output_type_name


class MaxTurnsExceeded(LoviaError):
    """The run reached ``max_turns`` without a final answer."""


class BudgetExceeded(LoviaError):
    """A :class:`~lovia.reliability.RunBudget` limit was reached."""


class RunCancelled(LoviaError):
    """The run's cancel token fired (or the run handle was cancelled)."""


class GuardrailTripped(LoviaError):
    """An input or output guardrail vetoed the run."""

    def __init__(self, reason: str = "guardrail tripped", *, hint: str | None = None) -> None:
        super().__init__(reason, hint=hint)
        self.reason = reason


class RunBusy(LoviaError):
    """Another live worker holds the lease on this ``run_id``."""

    def __init__(
        self,
        message: str = "",
        *,
        run_id: str | None = None,
        expires_in: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.run_id = run_id
        self.expires_in = expires_in


class StoreError(LoviaError):
    """A session or checkpoint store failed."""


class CorruptRecordError(StoreError):
    """A stored record could not be decoded; names the session and run it belongs to."""

    def __init__(
        self,
        message: str = "",
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.session_id = session_id
        self.run_id = run_id


class SchemaTooNewError(StoreError):
    """The database was migrated by a newer lovia than this one."""


class LeaseLostError(StoreError):
    """This worker's lease on a run expired and another worker took the run over."""


class MCPError(LoviaError):
    """An MCP server call failed."""

    def __init__(self, message: str = "", *, tool_name: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.tool_name = tool_name
