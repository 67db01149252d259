"""MCP: tools from Model Context Protocol servers, as ordinary lovia tools.

The official ``mcp`` SDK is imported only when a connection opens (extra ``lovia[mcp]``), so this
module is always importable. One :class:`MCPConnection` owns one client session; a background task
holds the SDK's transport and session contexts (anyio needs them entered and left by one task),
and calls from any task go through the session. Every failure on the server's side (it died, it
hangs, it wrote something that is not JSON-RPC, it listed a broken schema) surfaces as
:class:`~lovia.exceptions.MCPError` with a hint; a tool that answers ``isError`` is not a failure
of the connection and is rendered back to the model as ``[tool error] ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import MCPError, UserError
from ..tools import Tool
from ..tools._tool import RERUN, ApprovalPredicate, ToolResultRenderer, truncate_tool_output
from .base import PluginInstance

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "MCP",
    "MCPConnection",
    "MCPError",
    "MCPServer",
    "MCPServerLike",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "MCPToolResult",
    "normalize_schema",
    "render_mcp_content",
]

JsonObject = dict[str, Any]
_CONNECTION_CLOSED = -32000  # JSON-RPC code the SDK uses for a transport that went away
_OPEN_TIMEOUT = 30.0  # the handshake, and then the whole tool listing, each get this long
_MAX_LIST_PAGES = 100
_DEFER_SEARCH = "search_mcp_tools"
_DEFER_CALL = "call_mcp_tool"


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise UserError(
            "the MCP plugin needs the 'mcp' package, which is not installed",
            hint="pip install 'lovia[mcp]'",
        ) from exc
    return mcp


# ----------------------------------------------------------------------------- results


@dataclass
class MCPToolResult:
    """The raw answer of one MCP tool call (what a custom ``result_renderer`` receives)."""

    content: list[Any] = field(default_factory=list)
    is_error: bool = False
    structured: Any = None

    def __str__(self) -> str:
        """The text the model reads: the rendered content, ``[tool error] ...`` for an error."""
        return _default_renderer(self)


def _field(obj: Any, *names: str) -> Any:
    """Read a field from an SDK model or a plain dict, under its v2 or v1 spelling."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return None


def _size_stamp(data: Any) -> str:
    """``N B``: the decoded size of base64 ``data`` (counted, never decoded), or of raw bytes."""
    if isinstance(data, (bytes, bytearray)):
        return f"{len(data)} B"
    if not isinstance(data, str):
        return "? B"
    digits = len(data) - data.count("=") - sum(data.count(c) for c in " \t\r\n")
    return f"{digits * 6 // 8} B"


def render_mcp_content(content: list[Any], *, is_error: bool = False) -> str:
    """Render MCP content blocks as model text.

    Text is inlined, images and audio become placeholders with their media type and decoded size
    (``[image: image/png, 3 B]``; never base64),
    embedded resources show their text (or a placeholder for blobs), and resource links become
    ``[resource link: uri]`` lines. An error result is prefixed with ``[tool error]``.
    """
    lines: list[str] = []
    for block in content:
        kind = _field(block, "type")
        if kind == "text":
            lines.append(str(_field(block, "text") or ""))
        elif kind in ("image", "audio"):
            mime = _field(block, "mime_type", "mimeType") or "?"
            lines.append(f"[{kind}: {mime}, {_size_stamp(_field(block, 'data'))}]")
        elif kind == "resource_link":
            lines.append(f"[resource link: {_field(block, 'uri')}]")
        elif kind == "resource":
            res = _field(block, "resource")
            text = _field(res, "text")
            if text is not None:
                lines.append(str(text))
            else:
                mime = _field(res, "mime_type", "mimeType") or "?"
                lines.append(f"[resource: {_field(res, 'uri')}, {mime}, {_size_stamp(_field(res, 'blob'))}]")
        else:
            lines.append(f"[{kind or 'unknown'} content]")
    text = "\n".join(lines)
    return f"[tool error] {text}" if is_error else text


def _default_renderer(raw: Any, ctx: RunContext[Any] | None = None) -> str:
    if isinstance(raw, MCPToolResult):
        text = render_mcp_content(raw.content, is_error=raw.is_error)
        if not raw.content and raw.structured is not None and not raw.is_error:
            text = json.dumps(raw.structured, ensure_ascii=False, default=str)
        return text
    return str(raw)


# ----------------------------------------------------------------------------- schemas


def normalize_schema(schema: object) -> JsonObject:
    """Turn a server's tool input schema into an object schema lovia can offer a model.

    Loose schemas are repaired (no ``type`` -> ``object``, no ``properties`` -> ``{}``,
    ``required`` naming unknown properties is trimmed). A schema that cannot be repaired (not an
    object, ``properties`` not a mapping, a property schema that is not an object, ``required``
    not a list of names, or not a valid JSON Schema) raises :class:`MCPError`.
    """
    if schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise MCPError(f"input schema is a {type(schema).__name__}, not an object", hint=_SCHEMA_HINT)
    out: JsonObject = dict(schema)
    kind = out.get("type", "object")
    if kind != "object":
        raise MCPError(f"input schema has type {kind!r}; tools take an object", hint=_SCHEMA_HINT)
    out["type"] = "object"
    props = out.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, (dict, bool)) for v in props.values()):
        raise MCPError("input schema 'properties' is not a mapping of schemas", hint=_SCHEMA_HINT)
    out["properties"] = props
    required = out.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise MCPError("input schema 'required' is not a list of property names", hint=_SCHEMA_HINT)
        out["required"] = [r for r in required if r in props]
    _check_json_schema(out)
    return out


_SCHEMA_HINT = "fix the server's tool definition, or leave the tool out with exclude_tools=[...]"


def _check_json_schema(schema: JsonObject) -> None:
    try:
        from jsonschema import exceptions, validators  # installed with the mcp SDK
    except ImportError:  # pragma: no cover - the SDK depends on jsonschema
        return
    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as exc:
        raise MCPError(f"input schema is not valid JSON Schema: {exc.message}", hint=_SCHEMA_HINT) from None


# ----------------------------------------------------------------------------- connection


def _is_closed(exc: BaseException) -> bool:
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(getattr(exc, "error", None), "code", None)
    return code == _CONNECTION_CLOSED


def _sdk_error_type() -> type[BaseException]:
    from mcp.shared import exceptions

    found = getattr(exceptions, "MCPError", None) or getattr(exceptions, "McpError", None)
    return found if isinstance(found, type) else Exception


class _Gone(Exception):
    """Internal: the connection is dead (the server exited or the transport closed)."""


@dataclass(eq=False)
class MCPConnection:
    """A live session with one MCP server (open it with :meth:`open` or ``server.session()``).

    ``transport`` returns a fresh SDK transport context each time it is called, which is what
    makes reconnecting possible.
    """

    transport: Callable[[], Any]
    prefix: str | None = None
    include_tools: set[str] | None = None
    exclude_tools: set[str] | None = None
    needs_approval: bool | ApprovalPredicate | Collection[str] = False
    retries: int | None = None
    timeout: float | None = None
    max_output_chars: int | None = None
    result_renderer: ToolResultRenderer | None = None
    auto_reconnect: bool = True
    close_after_run: bool = False
    defer: bool = False
    label: str = "mcp server"
    open_timeout: float = _OPEN_TIMEOUT

    _session: Any = field(default=None, init=False, repr=False)
    _owner: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _stop: asyncio.Event | None = field(default=None, init=False, repr=False)
    _tools: list[Tool[Any]] = field(default_factory=list, init=False, repr=False)
    _wire_error: str | None = field(default=None, init=False, repr=False)
    _inflight: set[asyncio.Task[Any]] = field(default_factory=set, init=False, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    # -- lifecycle

    @property
    def is_open(self) -> bool:
        """True while the session's owner task is alive."""
        return self._owner is not None and not self._owner.done() and self._session is not None

    async def open(self) -> MCPConnection:
        """Connect, handshake and list the tools (idempotent while open).

        If the listing fails or the caller is cancelled, the connection is closed (a stdio
        server and its process group are stopped) before the error goes up.
        """
        async with self._lock:
            if not self.is_open:
                await self._start()
                try:
                    await self._list_tools()
                except BaseException:
                    await self._close_quietly()
                    raise
        return self

    async def _close_quietly(self) -> None:
        """Shut down after a failed or cancelled open; a second cancel cannot stop the shutdown.

        (``_shutdown`` swallows its own errors; a cancel while waiting here goes up at once and
        leaves the shutdown running in the background.)
        """
        await asyncio.shield(asyncio.ensure_future(self._shutdown()))

    async def _start(self) -> None:
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        self._stop, self._session, self._wire_error = stop, None, None
        own = self._own_session(_sdk(), ready, stop)
        self._owner = asyncio.get_running_loop().create_task(own, name=f"lovia-mcp-{self.label}")
        try:
            self._session = await asyncio.wait_for(asyncio.shield(ready), self.open_timeout)
        except asyncio.TimeoutError:
            await self._shutdown(force=True)
            raise MCPError(
                f"{self.label}: no handshake within {self.open_timeout:g}s",
                hint="check that the command starts an MCP server on stdio (or the URL serves MCP)",
            ) from None
        except UserError:
            await self._shutdown(force=True)
            raise
        except BaseException as exc:
            await self._shutdown(force=True)
            if isinstance(exc, asyncio.CancelledError):
                raise
            leaf = _leaf(exc)
            raise MCPError(
                f"{self.label}: could not connect: {type(leaf).__name__}: {_one_line(leaf)}",
                hint="check the server command/URL and run it by hand to see its error output",
            ) from exc

    async def _on_message(self, message: Any) -> None:
        """The SDK reports wire errors here: remember the first line and fail calls in flight."""
        if isinstance(message, Exception):
            self._wire_error = f"{type(message).__name__}: {str(message).splitlines()[0][:200]}"
            for task in list(self._inflight):
                task.cancel(_WIRE_ERROR)

    async def _own_session(self, mcp: Any, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """The task that owns the transport and the SDK session until ``stop`` is set.

        The SDK's context managers must be entered and left in one task, so this task holds them
        and hands the session out through ``ready``.
        """
        try:
            async with self.transport() as streams:
                async with mcp.ClientSession(streams[0], streams[1], message_handler=self._on_message) as session:
                    await session.initialize()
                    if not ready.done():
                        ready.set_result(session)
                    await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    async def _shutdown(self, *, force: bool = False) -> None:
        owner, self._owner = self._owner, None
        if self._stop is not None:
            self._stop.set()
        if owner is None:
            return
        if force:  # still handshaking: only a cancel gets it out (the SDK still stops the child)
            owner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 10.0)
        except BaseException:
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner

    async def close(self) -> None:
        """Close the session and stop a stdio server (safe to call twice)."""
        async with self._lock:
            await self._shutdown()
            self._session = None

    async def __aenter__(self) -> MCPConnection:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- tools

    def tools(self) -> list[Tool[Any]]:
        """The converted tools from the last listing (after include/exclude)."""
        return list(self._tools)

    async def refresh_tools(self) -> list[Tool[Any]]:
        """List the server's tools again."""
        await self.open()
        async with self._lock:
            return await self._list_tools()

    async def _list_tools(self) -> list[Tool[Any]]:
        listed: list[Any] = []
        try:
            await asyncio.wait_for(self._list_pages(listed), self.open_timeout)
        except asyncio.TimeoutError:
            raise MCPError(
                f"{self.label}: listing tools did not finish within {self.open_timeout:g}s "
                f"({len(listed)} tools listed so far)",
                hint="the server lists its tools too slowly or its pages never end; fix the server "
                "(or raise open_timeout= on the connection)",
            ) from None
        tools: list[Tool[Any]] = []
        for spec in listed:
            raw = str(spec.name)
            if self.include_tools is not None and raw not in self.include_tools:
                continue
            if self.exclude_tools is not None and raw in self.exclude_tools:
                continue
            tools.append(self._convert(spec))
        self._tools = tools
        return list(tools)

    async def _list_pages(self, listed: list[Any]) -> None:
        """Fetch every tools/list page into ``listed``: at most _MAX_LIST_PAGES, no cursor twice."""
        cursor: Any = None
        seen: set[str] = set()
        for _ in range(_MAX_LIST_PAGES):
            try:
                session = self._session
                if session is None:
                    raise _Gone()
                page = await self._bounded(session.list_tools(**_cursor(cursor)), what="tools/list")
            except _Gone:
                raise MCPError(f"{self.label}: the server went away while listing tools", hint=_DIED_HINT) from None
            except MCPError:
                raise
            except Exception as exc:
                raise MCPError(
                    f"{self.label}: listing tools failed: {type(exc).__name__}: {_one_line(exc)}",
                    hint="the server could not list its tools; run it by hand to see its error output",
                ) from exc
            listed.extend(page.tools)
            cursor = _field(page, "next_cursor", "nextCursor")
            if not cursor:
                return
            if str(cursor) in seen:
                raise MCPError(
                    f"{self.label}: the tool listing sent the cursor {str(cursor)[:50]!r} twice",
                    hint="the server's tools/list pagination loops (a next cursor it already sent); fix the server",
                )
            seen.add(str(cursor))
        raise MCPError(
            f"{self.label}: the tool listing has more than {_MAX_LIST_PAGES} pages",
            hint="the server keeps sending a next cursor; fix its tools/list pagination",
        )

    def _convert(self, spec: Any) -> Tool[Any]:
        raw = str(spec.name)
        exposed = f"{self.prefix}__{raw}" if self.prefix else raw
        try:
            params = normalize_schema(_field(spec, "input_schema", "inputSchema"))
        except MCPError as exc:
            raise MCPError(f"{self.label}: tool {raw!r}: {exc.message}", tool_name=exposed, hint=exc.hint) from None
        notes = _field(spec, "annotations")
        safe = bool(_field(notes, "read_only_hint", "readOnlyHint")) or bool(
            _field(notes, "idempotent_hint", "idempotentHint")
        )

        async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> MCPToolResult:
            return await self.call_tool(raw, args, exposed_name=exposed)

        wanted = self.needs_approval
        gate: bool | ApprovalPredicate
        if isinstance(wanted, bool) or callable(wanted):
            gate = wanted
        else:  # per tool: the raw names that need approval
            gate = raw in set(wanted)
        return Tool(
            name=exposed,
            description=str(_field(spec, "description") or ""),
            parameters=params,
            invoke=invoke,
            needs_approval=gate,
            retries=self.retries,
            max_output_chars=self.max_output_chars,
            result_renderer=self.result_renderer or _default_renderer,
            idempotent=safe,
        )

    # -- calls

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, exposed_name: str | None = None
    ) -> MCPToolResult:
        """Call the server's tool ``name`` (raw, unprefixed); reconnects once if the server died."""
        label = exposed_name or name
        try:
            return await self._call_once(name, arguments, label)
        except _Gone:
            if not self.auto_reconnect:
                raise MCPError(
                    f"{self.label}: the server went away during {label!r}", tool_name=label, hint=_DIED_HINT
                ) from None
        try:
            async with self._lock:
                await self._shutdown()
                await self._start()
            return await self._call_once(name, arguments, label)
        except _Gone:
            raise MCPError(
                f"{self.label}: the server went away during {label!r}, again after reconnecting",
                tool_name=label,
                hint=_DIED_HINT,
            ) from None
        except MCPError as exc:
            exc.tool_name = exc.tool_name or label
            raise

    async def _call_once(self, name: str, arguments: dict[str, Any], label: str) -> MCPToolResult:
        session = self._session
        if session is None or not self.is_open:
            if self._owner is None:
                await self.open()
                session = self._session
            else:
                raise _Gone()
        try:
            result = await self._bounded(session.call_tool(name, arguments), what=f"call {label!r}", tool=label)
        except _Gone:
            raise
        except MCPError:
            raise
        except Exception as exc:
            if isinstance(exc, _sdk_error_type()) and "session not found" in str(exc).lower():
                raise _Gone() from exc  # an HTTP server that restarted forgot our session
            if isinstance(exc, _sdk_error_type()):
                raise MCPError(
                    f"{self.label}: {label!r} failed: {_one_line(exc)}",
                    tool_name=label,
                    hint="the server rejected the request; check the arguments against the tool's schema",
                ) from exc
            raise MCPError(
                f"{self.label}: {label!r}: malformed answer: {type(exc).__name__}: {_one_line(exc)}",
                tool_name=label,
                hint="the server sent a result that is not valid MCP; report it to the server's authors",
            ) from exc
        return MCPToolResult(
            content=list(_field(result, "content") or []),
            is_error=bool(_field(result, "is_error", "isError")),
            structured=_field(result, "structured_content", "structuredContent"),
        )

    async def _bounded(self, awaitable: Any, *, what: str, tool: str | None = None) -> Any:
        """Await one request: time-bounded, failing fast on wire garbage and on a dead server."""
        task = asyncio.ensure_future(awaitable)
        self._inflight.add(task)
        owner = self._owner
        limit = self.timeout if tool is not None else self.open_timeout
        try:
            waiters: set[asyncio.Future[Any]] = {task}
            if owner is not None:
                waiters.add(owner)
            done, _ = await asyncio.wait(waiters, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                if owner is not None and owner in done:
                    raise _Gone()
                raise MCPError(
                    f"{self.label}: no answer to {what} within {limit:g}s",
                    tool_name=tool,
                    hint="the server hangs or the call is slow; raise timeout= on the server config",
                )
            try:
                return task.result()
            except asyncio.CancelledError:
                if self._wire_error is not None:
                    raise MCPError(
                        f"{self.label}: the server wrote something that is not JSON-RPC: {self._wire_error}",
                        tool_name=tool,
                        hint="an MCP stdio server must write only protocol messages to stdout (logs go to stderr)",
                    ) from None
                raise
            except Exception as exc:
                if _is_closed(exc):
                    raise _Gone() from exc
                raise
        except asyncio.CancelledError:
            task.cancel()  # the SDK tells the server (notifications/cancelled)
            with contextlib.suppress(BaseException):
                await task
            raise
        finally:
            self._inflight.discard(task)


_WIRE_ERROR = "lovia-mcp-wire-error"
_DIED_HINT = "the server process exited or the connection dropped; check its stderr output"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio task groups raise."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner:
            return exc
        exc = inner[0]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _cursor(cursor: Any) -> dict[str, Any]:
    if not cursor:
        return {}
    from mcp import types

    return {"params": types.PaginatedRequestParams(cursor=cursor)}


# ----------------------------------------------------------------------------- server configs


@runtime_checkable
class MCPServerLike(Protocol):
    """A server config or a live connection: what :class:`MCP` accepts."""

    @property
    def close_after_run(self) -> bool: ...

    @property
    def defer(self) -> bool: ...

    async def open(self) -> MCPConnection: ...


@dataclass(frozen=True, kw_only=True)
class MCPServer:
    """Options shared by both transports; build :class:`MCPServerStdio` or :class:`MCPServerStreamableHTTP`."""

    name: str | None = None
    include_tools: list[str] | None = None
    exclude_tools: list[str] | None = None
    needs_approval: bool | ApprovalPredicate | Collection[str] = False
    retries: int | None = None
    timeout: float | None = None
    max_output_chars: int | None = None
    result_renderer: ToolResultRenderer | None = None
    auto_reconnect: bool = True
    close_after_run: bool = True
    defer: bool = False

    def _transport(self) -> Callable[[], Any]:
        # The base holds the shared options only; each transport subclass says how to connect.
        raise UserError(
            f"{type(self).__name__} has no transport",
            hint="build MCPServerStdio(command=...) or MCPServerStreamableHTTP(url=...) instead of MCPServer",
        )

    def _label(self) -> str:
        return f"mcp server {self.name!r}" if self.name else "mcp server"

    def connection(self) -> MCPConnection:
        """A connection object for this config, not yet opened."""
        return MCPConnection(
            transport=self._transport(),
            prefix=self.name,
            include_tools=set(self.include_tools) if self.include_tools is not None else None,
            exclude_tools=set(self.exclude_tools) if self.exclude_tools is not None else None,
            needs_approval=self.needs_approval,
            retries=self.retries,
            timeout=self.timeout,
            max_output_chars=self.max_output_chars,
            result_renderer=self.result_renderer,
            auto_reconnect=self.auto_reconnect,
            close_after_run=self.close_after_run,
            defer=self.defer,
            label=self._label(),
        )

    async def open(self) -> MCPConnection:
        """Open a new connection (the caller closes it)."""
        return await self.connection().open()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[MCPConnection]:
        """``async with server.session() as conn``: a persistent connection runs never close."""
        conn = self.connection()
        conn.close_after_run = False
        await conn.open()
        try:
            yield conn
        finally:
            await conn.close()


@dataclass(frozen=True, kw_only=True)
class MCPServerStdio(MCPServer):
    """A server started as a child process speaking MCP on stdin/stdout.

    The child inherits this process's environment unless ``env`` is given. On POSIX it runs in a
    process group of its own under a small launcher: whatever the server starts is ended with it
    when the connection closes (a process that leaves the group on purpose, a daemon, is not).
    """

    command: str
    args: list[str] | None = None
    env: dict[str, str] | None = None

    def _transport(self) -> Callable[[], Any]:
        def make() -> Any:
            mcp = _sdk()
            env = dict(os.environ) if self.env is None else dict(self.env)
            search = env.get("PATH") or os.environ.get("PATH", os.defpath)  # the SDK adds ours when env has none
            if shutil.which(self.command, path=search) is None:
                raise FileNotFoundError(errno.ENOENT, "no such command on the PATH (or not executable)", self.command)
            argv = [*_launcher(), self.command, *(self.args or [])]
            params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], env=env)
            return mcp.stdio_client(params)

        return make


def _launcher() -> list[str]:
    """The command prefix that runs a stdio server under _mcp_launcher.py (POSIX), or nothing."""
    script = Path(__file__).with_name("_mcp_launcher.py")
    if os.name != "posix" or not sys.executable or not script.is_file():
        return []
    return [sys.executable, "-I", "-S", str(script)]


@dataclass(frozen=True, kw_only=True)
class MCPServerStreamableHTTP(MCPServer):
    """A server reached over MCP's streamable HTTP transport."""

    url: str
    headers: dict[str, str] | None = None

    def _transport(self) -> Callable[[], Any]:
        def make() -> Any:
            _sdk()
            from mcp.client import streamable_http as sh

            modern = getattr(sh, "streamable_http_client", None)
            if modern is not None:
                from mcp.shared._httpx_utils import create_mcp_http_client

                return _owning_client(modern, self.url, create_mcp_http_client(headers=dict(self.headers or {})))
            legacy: Any = getattr(sh, "streamablehttp_client", None)  # SDK 1.x
            return legacy(self.url, headers=dict(self.headers or {}))

        return make


@contextlib.asynccontextmanager
async def _owning_client(factory: Any, url: str, client: Any) -> AsyncIterator[Any]:
    async with client:
        async with factory(url, http_client=client) as streams:
            yield streams


# ----------------------------------------------------------------------------- plugin


class MCP:
    """The plugin: ``MCP(server_a, server_b, ...)`` contributes the servers' tools to a run.

    A server *config* is opened in ``setup()`` and closed at run end (``close_after_run``); a live
    :class:`MCPConnection` you opened yourself is used as it is and never closed by the run.
    Servers with ``defer=True`` are reached through ``search_mcp_tools`` / ``call_mcp_tool``.
    """

    name: str
    servers: tuple[MCPServerLike, ...]

    def __init__(self, *servers: MCPServerLike, name: str = "mcp") -> None:
        for server in servers:
            if not isinstance(server, MCPServerLike):
                raise UserError(
                    f"MCP(): {server!r} is not an MCP server config or connection",
                    hint="pass MCPServerStdio(...), MCPServerStreamableHTTP(...) or an MCPConnection",
                )
        self.servers: tuple[MCPServerLike, ...] = servers
        self.name = name
        self._kept: dict[int, MCPConnection] = {}

    async def close(self) -> None:
        """Close the connections kept open across runs (configs with ``close_after_run=False``)."""
        kept, self._kept = list(self._kept.values()), {}
        for conn in kept:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _connection(self, index: int, server: MCPServerLike) -> MCPConnection:
        if isinstance(server, MCPConnection):
            return await server.open()
        if server.close_after_run:
            return await server.open()
        kept = self._kept.get(index)  # one connection reused by this plugin's sequential runs
        if kept is None or not kept.is_open:
            kept = await server.open()
            self._kept[index] = kept
        return kept

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Open each server, convert its tools and register the connections' cleanup."""
        opened: list[MCPConnection] = []

        async def aclose() -> None:
            for conn in reversed(opened):
                with contextlib.suppress(Exception):
                    await conn.close()

        direct: list[Tool[Any]] = []
        deferred: list[Tool[Any]] = []
        try:
            for index, server in enumerate(self.servers):
                conn = await self._connection(index, server)
                if conn.close_after_run and not isinstance(server, MCPConnection):
                    opened.append(conn)
                (deferred if conn.defer else direct).extend(conn.tools())
        except BaseException:
            await aclose()
            raise
        names = [t.name for t in direct]
        for t in deferred:
            if t.name in names:
                await aclose()
                raise UserError(
                    f"MCP: the deferred tool name {t.name!r} is used twice",
                    hint="give the servers distinct name= prefixes",
                )
            names.append(t.name)
        tools = list(direct)
        instructions = None
        if deferred:
            tools += _deferred_pair(deferred)
            listed = ", ".join(t.name for t in deferred)
            instructions = (
                f"More tools are available through `{_DEFER_SEARCH}` (find one and see its parameters) "
                f"and `{_DEFER_CALL}` (call it by exact name): {listed}."
            )
        return PluginInstance(tools=tools, instructions=instructions, aclose=aclose)


def _deferred_pair(deferred: Sequence[Tool[Any]]) -> list[Tool[Any]]:
    """``search_mcp_tools`` and ``call_mcp_tool`` over the deferred tools."""
    pair = _Deferred({t.name: t for t in deferred})
    search_tool: Tool[Any] = Tool(
        name=_DEFER_SEARCH,
        description="Search the deferred MCP tools by keywords; returns names, descriptions and parameter schemas.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["query"],
        },
        invoke=pair.search,
    )
    call_tool: Tool[Any] = Tool(
        name=_DEFER_CALL,
        description="Call a deferred MCP tool by its exact name with its arguments object.",
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
        invoke=pair.call,
        needs_approval=pair.approval,
        result_renderer=pair.render,
        idempotent=False,
        reconcile=pair.reconcile,
    )
    return [search_tool, call_tool]


@dataclass
class _Delegated:
    tool: Tool[Any]
    raw: Any


@dataclass
class _Deferred:
    """A deferred call runs under the target tool's own approval, retries, renderer and size cap."""

    by_name: dict[str, Tool[Any]]

    def target(self, args: dict[str, Any]) -> Tool[Any]:
        name = args.get("name")
        found = self.by_name.get(name) if isinstance(name, str) else None
        if found is None:
            raise UserError(f"no deferred MCP tool named {name!r}", hint=f"use {_DEFER_SEARCH} to find the exact name")
        return found

    async def search(self, args: dict[str, Any], ctx: RunContext[Any]) -> str:
        words = [w for w in str(args.get("query", "")).lower().split() if w]
        scored = []
        for t in self.by_name.values():
            hay = f"{t.name} {t.description}".lower()
            score = sum(hay.count(w) for w in words) if words else 1
            if score:
                scored.append((-score, t.name, t))
        limit = args.get("limit")
        keep = limit if isinstance(limit, int) and limit > 0 else 5
        found = [{"name": t.name, "description": t.description, "parameters": t.parameters} for *_, t in sorted(scored)]
        return json.dumps(found[:keep], ensure_ascii=False) if found else "no matching tools"

    async def call(self, args: dict[str, Any], ctx: RunContext[Any]) -> _Delegated:
        tool = self.target(args)
        inner = args.get("arguments") or {}
        if not isinstance(inner, dict):
            raise UserError("call_mcp_tool: arguments must be an object", hint="pass the tool's arguments as an object")
        attempts = 1 + (tool.retries or 0)
        for attempt in range(attempts):
            try:
                return _Delegated(tool, await tool.invoke(inner, ctx))
            except MCPError:
                if attempt + 1 == attempts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def approval(self, args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        try:
            tool = self.target(args)
        except UserError:
            return False  # the call itself reports the unknown name
        gate = tool.needs_approval
        if not callable(gate):
            return bool(gate)
        inner = args.get("arguments")
        verdict = gate(dict(inner) if isinstance(inner, dict) else {}, ctx)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)

    def render(self, raw: Any, ctx: RunContext[Any]) -> str:
        if isinstance(raw, _Delegated):
            renderer = raw.tool.result_renderer or _default_renderer
            return truncate_tool_output(str(renderer(raw.raw, ctx)), raw.tool.max_output_chars)
        return str(raw)

    def reconcile(self, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        tool = self.by_name.get(str(args.get("name")))
        if tool is not None and tool.idempotent:
            return RERUN
        return "[tool error] this call had started before a crash and was not repeated; check whether it took effect"
