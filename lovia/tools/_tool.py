"""``Tool`` and ``@tool``: what a model may call, and how one call is executed and rendered."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import json
import pathlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from ..exceptions import InvalidToolArguments, UserError
from ..messages import FilePart, ImagePart, TextPart
from ._schema import FunctionSignature, inspect_function

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "RERUN",
    "ApprovalPredicate",
    "Tool",
    "ToolInvoker",
    "ToolPolicy",
    "ToolResultRenderer",
    "apply_tool_policies",
    "default_result_renderer",
    "needs_vision",
    "render_tool_result",
    "result_to_text",
    "tool",
    "truncate_tool_output",
]

T = TypeVar("T")
Invoke = Callable[[dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
ToolPolicy = Callable[[Invoke, dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
"""``(invoke, raw_args, ctx) -> result``: wraps a tool call (logging, caching, dedup...)."""
Renderer = Callable[[Any, "RunContext[Any]"], str]
ApprovalPredicate = Callable[[dict[str, Any], "RunContext[Any]"], "bool | Awaitable[bool]"]
"""``(args, ctx) -> bool`` (sync or async): whether this particular call needs approval."""
ToolInvoker = Invoke
"""``async (args, ctx) -> result``: how a :class:`Tool` is called."""
ToolResultRenderer = Renderer
"""``(raw_result, ctx) -> str``: the text the model gets for a successful call."""
Reconcile = Callable[[dict[str, Any], "RunContext[Any]"], Any]


class _Rerun:
    def __repr__(self) -> str:
        return "RERUN"


RERUN: Any = _Rerun()
"""Return this from a ``reconcile`` hook to execute the dangling call again."""


@dataclass(eq=False)
class Tool(Generic[T]):
    """A callable the model may use.

    ``invoke(args, ctx)`` receives the parsed JSON arguments (a dict) and the live
    :class:`~lovia.run_context.RunContext`. Build one by hand, or with :func:`tool`.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    invoke: Invoke
    strict: bool = False
    needs_approval: bool | ApprovalPredicate = False
    retries: int | None = None
    """Extra attempts after a failure (``None`` = the agent's ``default_tool_retries``)."""
    timeout: float | None = None
    """Seconds per attempt (``None`` = the agent's ``default_tool_timeout``)."""
    parallel: bool = True
    """``False`` makes the call a barrier: it runs alone."""
    max_output_chars: int | None = None
    result_renderer: Renderer | None = None
    policies: Sequence[ToolPolicy] = ()
    idempotent: bool = True
    """``False``: a call left dangling by a crash is not re-run on resume (see ``reconcile``)."""
    reconcile: Reconcile | None = None
    """For non-idempotent tools: ``(args, ctx) -> result | RERUN`` decides a dangling call's fate."""
    returns_images: bool = False
    """Declares that results carry image parts (see :func:`needs_vision`): offer it to vision models only."""
    signature: FunctionSignature | None = field(default=None, repr=False)
    is_handoff: bool = field(default=False, repr=False)
    function: Callable[..., Any] | None = field(default=None, repr=False)
    """The Python function :func:`tool` wrapped (``None`` for a hand-built tool); calling the tool calls it."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise UserError("a tool needs a non-empty name", hint="pass name=... or decorate a named function")
        if self.retries is not None and self.retries < 0:
            raise UserError(f"tool {self.name!r}: retries must be >= 0", hint="use 0 for no retries")
        if self.function is not None:
            # Look like the wrapped function to ``inspect.signature`` and ``functools`` users.
            self.__wrapped__ = self.function
            self.__signature__ = inspect.signature(self.function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no validation, no run context, no policies).

        An ``async`` function returns its coroutine, as it would unwrapped. A tool built by hand
        (with only ``invoke``) has no function to call and raises :class:`UserError`.
        """
        if self.function is None:
            raise UserError(
                f"tool {self.name!r} has no Python function to call",
                hint="only tools made with @tool are callable; run a hand-built tool through an agent",
            )
        return self.function(*args, **kwargs)

    def validate(self, args: dict[str, Any]) -> None:
        """Raise :class:`InvalidToolArguments` when ``args`` do not fit the schema."""
        if self.signature is not None:
            self.signature.validate(args)

    def reconciler(self, fn: Reconcile) -> Reconcile:
        """Decorator form of ``reconcile``: ``@charge.reconciler``."""
        self.reconcile = fn
        return fn

    def requires_approval(self, args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        """Whether this call needs a human's approval (``needs_approval`` applied to ``args``).

        The run loop also accepts an ``async`` predicate; this synchronous form cannot wait for
        one and raises instead.
        """
        gate = self.needs_approval
        if not callable(gate):
            return bool(gate)
        verdict = gate(args, ctx)
        if inspect.isawaitable(verdict):
            close = getattr(verdict, "close", None)
            if callable(close):
                close()  # never awaited: close it so Python does not warn
            raise UserError(
                f"tool {self.name!r}: its needs_approval predicate is async",
                hint="the run loop awaits it; call the predicate yourself and await it outside a run",
            )
        return bool(verdict)

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry: ``{"type": "function", "function": {...}}``."""
        function: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.strict:
            function["strict"] = True
        return {"type": "function", "function": function}


def _bind(fn: Callable[..., Any], sig: FunctionSignature) -> Invoke:
    import contextvars

    is_async = inspect.iscoroutinefunction(fn)

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        kwargs = sig.validate(args)
        if sig.context_param is not None:
            kwargs[sig.context_param] = ctx
        if is_async:
            return await fn(**kwargs)
        # Sync tools run on a worker thread so the loop (and sibling calls) keep going; as with
        # asyncio.to_thread, the thread sees a copy of the caller's context variables (one
        # awaitable fewer than to_thread itself).
        call = functools.partial(contextvars.copy_context().run, fn, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    return invoke


@overload
def tool(fn: Callable[..., Any], /) -> Tool[Any]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: bool | ApprovalPredicate = False,
    retries: int | None = None,
    timeout: float | None = None,
    parallel: bool = True,
    max_output_chars: int | None = None,
    result_renderer: Renderer | None = None,
    policies: Sequence[ToolPolicy] = (),
    idempotent: bool = True,
    reconcile: Reconcile | None = None,
    returns_images: bool = False,
) -> Callable[[Callable[..., Any]], Tool[Any]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: bool | ApprovalPredicate = False,
    retries: int | None = None,
    timeout: float | None = None,
    parallel: bool = True,
    max_output_chars: int | None = None,
    result_renderer: Renderer | None = None,
    policies: Sequence[ToolPolicy] = (),
    idempotent: bool = True,
    reconcile: Reconcile | None = None,
    returns_images: bool = False,
) -> Tool[Any] | Callable[[Callable[..., Any]], Tool[Any]]:
    """Make a function (sync or async) a :class:`Tool`; usable bare or with options.

    The JSON Schema comes from the type hints, the description from the docstring's first
    paragraph, argument descriptions from ``Annotated`` metadata or a Google-style ``Args:``.
    """

    def build(f: Callable[..., Any]) -> Tool[Any]:
        tool_name = name or f.__name__
        sig = inspect_function(f, name=tool_name, strict=strict)
        doc = inspect.getdoc(f) or ""
        summary = doc.split("\n\n")[0].strip() if doc else ""
        return Tool(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=sig.parameters,
            invoke=_bind(f, sig),
            strict=strict,
            needs_approval=needs_approval,
            retries=retries,
            timeout=timeout,
            parallel=parallel,
            max_output_chars=max_output_chars,
            result_renderer=result_renderer,
            policies=tuple(policies),
            idempotent=idempotent,
            reconcile=reconcile,
            returns_images=returns_images,
            signature=sig,
            function=f,
        )

    return build(fn) if fn is not None else build


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse the model's raw argument JSON; anything but an object is ``InvalidToolArguments``."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidToolArguments(
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos})",
            hint="send the arguments as one JSON object",
        ) from None
    if not isinstance(value, dict):
        raise InvalidToolArguments("arguments must be a JSON object", hint="send the arguments as one JSON object")
    return value


def default_result_renderer(raw: Any, ctx: RunContext[Any] | None = None) -> str:
    """Strings pass through; everything else becomes JSON (usable as a ``(raw, ctx)`` renderer).

    Before encoding, values JSON cannot hold are converted (see :func:`result_to_text`).
    """
    if isinstance(raw, str):
        return raw
    tree = _jsonable(raw)
    try:
        return json.dumps(tree, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(tree)


def result_to_text(result: Any) -> str:
    """The default text for a tool's return value: strings as they are, anything else as JSON.

    Converted first: an Enum becomes its value (also as a dict key), a dataclass or pydantic
    model a dict (JSON mode), a datetime/date/time its ISO string, Decimal/UUID/Path ``str()``,
    bytes their UTF-8 text, a set/frozenset/tuple a list. When the tree still cannot be encoded
    the result is ``str()`` of it, never an exception.
    """
    return default_result_renderer(result)


def _jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` with every part JSON cannot hold converted (see :func:`result_to_text`)."""
    if depth > 100:
        return str(value)
    if isinstance(value, enum.Enum):  # before the scalars: IntEnum / StrEnum give their value
        return _jsonable(value.value, depth + 1)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {_json_key(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return _jsonable(dump(mode="json"), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to the other conversions
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    return _leaf(value)


def _leaf(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID, pathlib.PurePath)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return value


def _json_key(key: Any) -> Any:
    if isinstance(key, enum.Enum):
        key = key.value
    if key is None or isinstance(key, (str, int, float, bool)):
        return key
    converted = _jsonable(key)
    return converted if isinstance(converted, (str, int, float, bool)) else str(converted)


def render_tool_result(raw: Any, ctx: RunContext[Any], *, renderer: Renderer | None) -> tuple[str, list[Any] | None]:
    """Render a successful result: (text the model sees, rich parts or ``None``)."""
    parts: list[Any] | None = None
    if isinstance(raw, (ImagePart, FilePart)):
        parts = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(p, (TextPart, ImagePart, FilePart)) for p in raw):
        parts = list(raw)
    if parts is not None:
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart)) or f"[{len(parts)} attachment(s)]"
        return text, parts
    if renderer is not None:
        rendered = renderer(raw, ctx)
        # A renderer that returns something other than text is rendered once more, as JSON.
        return (rendered if isinstance(rendered, str) else default_result_renderer(rendered)), None
    return default_result_renderer(raw), None


def truncate_tool_output(text: str, max_chars: int | None) -> str:
    """Keep the head and tail of an over-long output with a marker in between."""
    if max_chars is None or len(text) <= max_chars:
        return text
    marker = f"\n\n[... {len(text) - max_chars} characters truncated ...]\n\n"
    keep = max(max_chars - len(marker), 0)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker + (text[-tail:] if tail else "")


def apply_tool_policies(invoke: Invoke, policies: Sequence[ToolPolicy]) -> Invoke:
    """Wrap ``invoke`` in ``policies`` (the first one outermost)."""
    wrapped = invoke
    for policy in reversed(policies):
        wrapped = functools.partial(_call_policy, policy, wrapped)
    return wrapped


async def _call_policy(policy: ToolPolicy, inner: Invoke, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
    return await policy(inner, args, ctx)


def needs_vision(tools: Sequence[Tool[Any]]) -> list[str]:
    """Names of the tools that declare ``returns_images=True``, for a check against a text-only model."""
    return [t.name for t in tools if t.returns_images]
