"""The same workloads on lovia and on its peers (OpenAI Agents SDK, LangGraph), one function each.

Imported by ``run_all.py`` inside ``bench/.peers`` (see ``setup_peers.sh``); every function
returns raw figures (seconds, bytes) and prints nothing. Peer imports happen inside the peer
functions so that this module can be imported with only lovia installed.

Scripted models: every framework is driven by a model that does no I/O and answers the same two
turns: a call to ``add(a=2, b=3)``, then the text ``ANSWER``. lovia uses its own
``ScriptedProvider``; for the peers we implement their public model interfaces here
(``agents.models.interface.Model`` and ``langchain_core``'s ``BaseChatModel``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from loop_overhead import ANSWER, QUESTION, lovia_runs

TOOL_RESULT_BYTES = 200
CHECKPOINT_RESULT_BYTES = 1024


def payload(seed: str, size: int) -> str:
    """A deterministic, unique, not very compressible text of exactly ``size`` ASCII characters."""
    out = ""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).hexdigest()
        counter += 1
    return out[:size]


def file_bytes(path: str) -> int:
    """Bytes on disk of a SQLite database: the main file plus any -wal/-journal left beside it."""
    total = 0
    for suffix in ("", "-wal", "-journal"):
        try:
            total += os.path.getsize(path + suffix)
        except OSError:
            pass
    return total


# =========================================================================== OpenAI Agents SDK


def _oai_model_class() -> type:
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class ScriptedResponsesModel(Model):
        """A no-network ``Model``: a call to ``add`` first, the answer once a tool output is in the input."""

        def _respond(self, input: Any) -> Any:
            answered = isinstance(input, list) and any(
                isinstance(item, dict) and item.get("type") == "function_call_output" for item in input[-2:]
            )
            if answered:
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text=ANSWER, annotations=[])],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id="fc_1",
                        type="function_call",
                        call_id="call_add",
                        name="add",
                        arguments=json.dumps({"a": 2, "b": 3}),
                        status="completed",
                    )
                ]
            usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
            return ModelResponse(output=output, usage=usage, response_id=None)

        async def get_response(
            self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs
        ):  # type: ignore[no-untyped-def]
            return self._respond(input)

        async def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise NotImplementedError("the benchmark only uses Runner.run")
            yield  # pragma: no cover

    return ScriptedResponsesModel


def oai_agent() -> Any:
    """An OpenAI Agents SDK agent with the scripted model and an ``add`` function tool."""
    from agents import Agent, function_tool

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return Agent(name="calc", instructions="You add numbers.", model=_oai_model_class()(), tools=[function_tool(add)])


async def oai_runs(runs: int, *, session_path: str | None = None) -> float:
    """Seconds per run over ``runs`` sequential ``Runner.run`` calls (tracing off: no network).

    With ``session_path``, each run gets its own ``SQLiteSession(session_id, path)`` on the shared
    file (constructed and closed inside the timed loop, as an application would per conversation).
    """
    from agents import RunConfig, Runner, SQLiteSession

    agent = oai_agent()
    config = RunConfig(tracing_disabled=True)

    async def one(i: int | str) -> Any:
        session = SQLiteSession(f"s{i}", session_path) if session_path else None
        try:
            return await Runner.run(agent, QUESTION, run_config=config, session=session)
        finally:
            if session is not None:
                session.close()

    await one("warm")
    start = time.perf_counter()
    for i in range(runs):
        result = await one(i)
    elapsed = time.perf_counter() - start
    assert result.final_output == ANSWER, result.final_output
    return elapsed / runs


# =========================================================================== Pydantic AI


def pai_agent() -> Any:
    """A Pydantic AI agent on its offline ``FunctionModel``: a call to ``add`` first, the answer once a
    tool return is in the last request. The ``add`` tool is a plain ``def`` registered with
    ``tool_plain``, like the other frameworks' (each runs it on a worker thread). The model function
    is ``async def``: a plain ``def`` would also go to a worker thread, which a real (HTTP) model
    does not."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    async def script(messages: list[Any], info: Any) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(ANSWER)])
        return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="call_add")])

    agent = Agent(FunctionModel(script), instructions="You add numbers.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return agent


class PaiHistoryStore:
    """Pydantic AI's documented persistence, on SQLite: the messages a run added, serialised with
    ``ModelMessagesTypeAdapter`` (``result.new_messages_json()``), one row per run; a load validates
    every row back. Pydantic AI bundles no SQLite store, so this is the code an application writes,
    and the file keeps what ``sqlite3.connect`` gives it: SQLite's defaults (rollback journal in
    ``DELETE`` mode, ``synchronous=FULL``). ``wal=True`` switches it to WAL, as the OpenAI Agents
    SDK's and LangGraph's stores do (still ``synchronous=FULL``). The SQL runs on the calling thread
    (no thread hop: the cheapest way)."""

    def __init__(self, path: str, *, wal: bool = False) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        if wal:
            self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS messages "
            "(id INTEGER PRIMARY KEY, conversation TEXT NOT NULL, body BLOB NOT NULL)"
        )
        self.conn.execute("CREATE INDEX IF NOT EXISTS messages_conversation ON messages (conversation, id)")

    def load(self, conversation: str) -> list[Any]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        rows = self.conn.execute("SELECT body FROM messages WHERE conversation = ? ORDER BY id", (conversation,))
        out: list[Any] = []
        for (body,) in rows:
            out += ModelMessagesTypeAdapter.validate_json(body)
        return out

    def append(self, conversation: str, body: bytes) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO messages (conversation, body) VALUES (?, ?)", (conversation, body))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


async def pai_runs(runs: int, *, session_path: str | None = None, wal: bool = False) -> float:
    """Seconds per run over ``runs`` sequential ``agent.run`` calls (the agent built once).

    With ``session_path``, each run is its own conversation in a :class:`PaiHistoryStore` on that
    file: its history is loaded (empty) and passed as ``message_history``, and the run's new
    messages are stored afterwards.
    """
    agent = pai_agent()
    store = PaiHistoryStore(session_path, wal=wal) if session_path else None

    async def one(i: int | str) -> Any:
        if store is None:
            return await agent.run(QUESTION)
        conversation = f"s{i}"
        result = await agent.run(QUESTION, message_history=store.load(conversation) or None)
        store.append(conversation, result.new_messages_json())
        return result

    try:
        await one("warm")
        start = time.perf_counter()
        for i in range(runs):
            result = await one(i)
        elapsed = time.perf_counter() - start
    finally:
        if store is not None:
            store.close()
    assert result.output == ANSWER, result.output
    return elapsed / runs


# =========================================================================== LangGraph


def _lg_model_class() -> type:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedChatModel(BaseChatModel):
        """A no-network chat model: a call to ``add`` first, the answer once a ToolMessage is last."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _answer(self, messages: list[Any]) -> ChatResult:
            if messages and isinstance(messages[-1], ToolMessage):
                msg = AIMessage(content=ANSWER)
            else:
                msg = AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_add"}])
            return ChatResult(generations=[ChatGeneration(message=msg)])

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            return self._answer(messages)

        async def _agenerate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            return self._answer(messages)

    return ScriptedChatModel


def lg_react_graph(checkpointer: Any = None) -> Any:
    """A hand-built ReAct graph (the shape of ``create_react_agent``): agent -> tools -> agent -> END."""
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @lc_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = _lg_model_class()().bind_tools([add])

    async def agent_node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def agent_node_sync(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    from langchain_core.runnables import RunnableLambda

    graph = StateGraph(MessagesState)
    graph.add_node("agent", RunnableLambda(agent_node_sync, afunc=agent_node))
    graph.add_node("tools", ToolNode([add]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


async def lg_runs(runs: int, *, session_path: str | None = None) -> float:
    """Seconds per run over ``runs`` sequential ``graph.ainvoke`` calls.

    With ``session_path``, the graph is compiled with an ``AsyncSqliteSaver`` on that file and each
    run is its own ``thread_id`` (LangGraph's conversation persistence is its checkpointer).
    """
    from langchain_core.messages import HumanMessage

    async def go(graph: Any) -> float:
        async def one(i: int | str) -> Any:
            config = {"configurable": {"thread_id": f"t{i}"}, "recursion_limit": 25}
            return await graph.ainvoke({"messages": [HumanMessage(QUESTION)]}, config)

        await one("warm")
        start = time.perf_counter()
        for i in range(runs):
            out = await one(i)
        elapsed = time.perf_counter() - start
        assert out["messages"][-1].content == ANSWER, out["messages"][-1]
        return elapsed / runs

    if session_path is None:
        return await go(lg_react_graph())
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(session_path) as saver:
        return await go(lg_react_graph(saver))


def lg_runs_sync(runs: int, *, session_path: str | None = None) -> float:
    """``lg_runs`` through the synchronous API (``graph.invoke``, ``SqliteSaver``)."""
    from langchain_core.messages import HumanMessage

    def go(graph: Any) -> float:
        def one(i: int | str) -> Any:
            config = {"configurable": {"thread_id": f"t{i}"}, "recursion_limit": 25}
            return graph.invoke({"messages": [HumanMessage(QUESTION)]}, config)

        one("warm")
        start = time.perf_counter()
        for i in range(runs):
            out = one(i)
        elapsed = time.perf_counter() - start
        assert out["messages"][-1].content == ANSWER
        return elapsed / runs

    if session_path is None:
        return go(lg_react_graph())
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(session_path, check_same_thread=False)
    try:
        return go(lg_react_graph(SqliteSaver(conn)))
    finally:
        conn.close()


LOOP_RUNNERS = {
    "lovia": lambda runs, path: lovia_runs(runs, session_path=path),
    "openai-agents": lambda runs, path: oai_runs(runs, session_path=path),
    "langgraph": lambda runs, path: lg_runs(runs, session_path=path),
    "pydantic-ai": lambda runs, path: pai_runs(runs, session_path=path),
    "pydantic-ai (wal)": lambda runs, path: pai_runs(runs, session_path=path, wal=True),
}


# =========================================================================== session append + load


def session_runs(n: int) -> list[list[dict[str, str]]]:
    """``n`` entries as runs of 4 (user, tool call, ~200-byte tool result, answer), neutral form.

    The last run is cut short when ``n`` is not a multiple of 4.
    """
    runs = []
    for r in range(0, (n + 3) // 4):
        call_id = f"call_{r}"
        run = [
            {"kind": "user", "text": f"Question {r}: what is the weather in city {r}?"},
            {"kind": "call", "call_id": call_id, "name": "weather", "arguments": json.dumps({"city": f"city {r}"})},
            {"kind": "result", "call_id": call_id, "output": payload(f"result {r}", TOOL_RESULT_BYTES)},
            {"kind": "answer", "text": f"In city {r} it is sunny and 21 degrees."},
        ]
        runs.append(run[: min(4, n - 4 * r)])
    return runs


def to_lovia(run: list[dict[str, str]]) -> list[Any]:
    from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

    out: list[Any] = []
    for e in run:
        if e["kind"] == "user":
            out.append(InputEntry(role="user", content=e["text"]))
        elif e["kind"] == "call":
            out.append(ToolCallEntry(call_id=e["call_id"], name=e["name"], arguments=e["arguments"]))
        elif e["kind"] == "result":
            out.append(ToolResultEntry(call_id=e["call_id"], output=e["output"]))
        else:
            out.append(AssistantTextEntry(content=e["text"]))
    return out


def to_oai(run: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The Responses-format items the OpenAI Agents SDK itself stores for such a run."""
    out: list[dict[str, Any]] = []
    for i, e in enumerate(run):
        if e["kind"] == "user":
            out.append({"role": "user", "content": e["text"]})
        elif e["kind"] == "call":
            out.append(
                {
                    "arguments": e["arguments"],
                    "call_id": e["call_id"],
                    "name": e["name"],
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "status": "completed",
                }
            )
        elif e["kind"] == "result":
            out.append({"call_id": e["call_id"], "output": e["output"], "type": "function_call_output"})
        else:
            out.append(
                {
                    "id": f"msg_{i}",
                    "content": [{"annotations": [], "text": e["text"], "type": "output_text", "logprobs": []}],
                    "role": "assistant",
                    "status": "completed",
                    "type": "message",
                }
            )
    return out


@dataclass
class SessionFigures:
    append_total: float
    """Seconds for all the appends."""
    load: float
    """Seconds for one full load."""
    loaded: int
    """Entries/items the load returned (checked against N)."""
    size: int


async def lovia_session(path: str, n: int, *, wal: bool = False) -> SessionFigures:
    from lovia.stores import SQLiteSession

    runs = [to_lovia(r) for r in session_runs(n)]
    store = SQLiteSession(path, wal=wal)
    try:
        start = time.perf_counter()
        for i, run in enumerate(runs):
            await store.append("conv", run, run_id=f"run-{i}")
        appended = time.perf_counter() - start
        start = time.perf_counter()
        loaded = await store.load("conv")
        load = time.perf_counter() - start
    finally:
        await store.close()
    return SessionFigures(appended, load, len(loaded), file_bytes(path))


async def oai_session(path: str, n: int) -> SessionFigures:
    from agents import SQLiteSession

    runs = [to_oai(r) for r in session_runs(n)]
    store = SQLiteSession("conv", path)
    try:
        start = time.perf_counter()
        for run in runs:
            await store.add_items(run)
        appended = time.perf_counter() - start
        start = time.perf_counter()
        loaded = await store.get_items()
        load = time.perf_counter() - start
    finally:
        store.close()
    return SessionFigures(appended, load, len(loaded), file_bytes(path))


def to_pai(run: list[dict[str, str]]) -> list[Any]:
    """The Pydantic AI messages of such a run: a request with the question, a response with the tool
    call, a request with its return, a response with the answer."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    for e in run:
        if e["kind"] == "user":
            out.append(ModelRequest(parts=[UserPromptPart(e["text"])]))
        elif e["kind"] == "call":
            out.append(ModelResponse(parts=[ToolCallPart(e["name"], e["arguments"], tool_call_id=e["call_id"])]))
        elif e["kind"] == "result":
            out.append(ModelRequest(parts=[ToolReturnPart("weather", e["output"], tool_call_id=e["call_id"])]))
        else:
            out.append(ModelResponse(parts=[TextPart(e["text"])]))
    return out


async def pai_session(path: str, n: int) -> SessionFigures:
    """Pydantic AI's way: each run's messages dumped with ``ModelMessagesTypeAdapter`` into a
    :class:`PaiHistoryStore` row (the serialisation is timed, as the other stores encode inside
    their append); the load validates every row back into messages."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    runs = [to_pai(r) for r in session_runs(n)]
    store = PaiHistoryStore(path)
    try:
        start = time.perf_counter()
        for run in runs:
            store.append("conv", ModelMessagesTypeAdapter.dump_json(run))
        appended = time.perf_counter() - start
        start = time.perf_counter()
        loaded = store.load("conv")
        load = time.perf_counter() - start
    finally:
        store.close()
    return SessionFigures(appended, load, len(loaded), file_bytes(path))


SESSION_RUNNERS = {
    "lovia": lovia_session,
    "lovia (wal)": lambda path, n: lovia_session(path, n, wal=True),
    "openai-agents": oai_session,
    "pydantic-ai": pai_session,
}


# =========================================================================== checkpoint growth


@dataclass
class GrowthFigures:
    steps: list[float] = field(default_factory=list)
    """Seconds spent saving each step, in order."""
    size: int = 0
    """Database bytes after the run, store closed."""


async def lovia_growth(path: str, k: int) -> GrowthFigures:
    """K saves of one 1 KB tool result each through ``SQLiteCheckpointer.append`` (default journal)."""
    from lovia.checkpointer import RunHead
    from lovia.messages import Usage
    from lovia.stores import SQLiteCheckpointer
    from lovia.transcript import ToolResultEntry

    figures = GrowthFigures()
    store = SQLiteCheckpointer(path)
    head = RunHead(agent_name="worker")
    try:
        await store.list_runs(limit=1)  # open the file and create the schema before timing
        for i in range(k):
            entry = ToolResultEntry(call_id=f"call_{i}", output=payload(f"step {i}", CHECKPOINT_RESULT_BYTES))
            head.turns = i + 1
            head.usage = Usage(input_tokens=10 * (i + 1), output_tokens=5 * (i + 1))
            head.updated_at = time.time()
            start = time.perf_counter()
            await store.append("run-1", [entry], head)
            figures.steps.append(time.perf_counter() - start)
        snapshot = await store.load("run-1")
        assert snapshot is not None and len(snapshot.entries) == k
    finally:
        await store.close()
    figures.size = file_bytes(path)
    return figures


def lg_growth(path: str, k: int) -> GrowthFigures:
    """A K-step LangGraph run: state ``messages`` with ``add_messages``, one ToolMessage per step.

    Default usage: ``SqliteSaver`` on the file, ``graph.invoke`` with a ``thread_id``; LangGraph
    checkpoints after every superstep. Save time per step is measured inside the saver: the time
    of the step's ``put_writes`` calls plus its ``put`` (serialisation and SQL both).
    """
    from typing import Annotated, TypedDict

    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # functional form: the class form's annotations would be strings here (``from __future__``)
    State = TypedDict("State", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013

    figures = GrowthFigures()
    pending = [0.0]

    class TimedSaver(SqliteSaver):
        def put_writes(self, *args: Any, **kwargs: Any) -> None:
            start = time.perf_counter()
            super().put_writes(*args, **kwargs)
            pending[0] += time.perf_counter() - start

        def put(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = super().put(*args, **kwargs)
            figures.steps.append(pending[0] + time.perf_counter() - start)
            pending[0] = 0.0
            return out

    # no annotations: LangGraph would try to evaluate them (strings here) in this local scope
    def step(state):  # type: ignore[no-untyped-def]
        i = len(state["messages"])
        return {
            "messages": [ToolMessage(content=payload(f"step {i}", CHECKPOINT_RESULT_BYTES), tool_call_id=f"call_{i}")]
        }

    def more(state):  # type: ignore[no-untyped-def]
        return "step" if len(state["messages"]) < k else END

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", more, ["step", END])
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        graph = builder.compile(checkpointer=TimedSaver(conn))
        out = graph.invoke({"messages": []}, {"configurable": {"thread_id": "run-1"}, "recursion_limit": k + 10})
        assert len(out["messages"]) == k
    finally:
        conn.close()
    # the first two checkpoints (the raw input, then the input applied to the state) come before
    # any step ran: they are not steps
    figures.steps = figures.steps[2:]
    assert len(figures.steps) == k, len(figures.steps)
    figures.size = file_bytes(path)
    return figures


def in_tempdir(fn: Any, *args: Any) -> Any:
    """Call ``fn(path, *args)`` with a fresh database path in a temporary directory (async or not)."""
    with tempfile.TemporaryDirectory(prefix="lovia-bench-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(os.path.join(tmp, "bench.db"), *args)
        if asyncio.iscoroutine(out):
            out = asyncio.run(out)
        return out
