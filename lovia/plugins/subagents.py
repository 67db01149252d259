"""Subagents: the model starts child runs in the background, watches, steers and stops them.

``spawn_subagent`` returns at once with an id (``t1``, ``t2``, ... per parent run); the child runs
concurrently as a run of its own (checkpointed under ``<parent run id>/<id>`` when the plugin is
given a ``checkpointer``),
and its report comes back later as a user-side message at a turn boundary (or through
``wait_subagents``), never as a late tool result. Reports are marked ``<subagent-report id=...>``
in the transcript, so after a crash the resumed parent knows which children already reported:
the others are re-issued under the same run id (a finished child replays its stored answer
without a model call, an interrupted one resumes), or reported as lost without a checkpointer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import RunCancelled, UserError
from ..reliability import CancelToken, Mailbox, RunBudget
from ..run_context import RunContext
from ..tools import Tool, tool
from ..transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry
from .base import PluginInstance

if TYPE_CHECKING:
    from ..agent import Agent
    from ..checkpointer import Checkpointer
    from ..result import RunResult

__all__ = ["ChildSpec", "DeliverFn", "RunChildFn", "SubagentReport", "Subagents", "render_report"]

_REPORT = re.compile(r'<subagent-report id="([^"]+)"')
_STARTED = re.compile(r"^Started subagent (\S+) ")


@dataclass
class SubagentReport:
    """How one child ended: its result or error, and the text handed to the parent.

    ``id`` is unique across parent runs (a key for delivery tables); ``task_id`` is the id the
    model knows the child by (``t1``, ``t2``, ... per parent run).
    """

    id: str
    agent: str
    prompt: str
    session_id: str | None
    result: RunResult[Any] | None
    error: BaseException | None
    text: str
    task_id: str = ""


@dataclass
class ChildSpec:
    """Everything a ``run_child`` override needs to run one child (deps are its own business).

    ``id`` is unique across parent runs; ``task_id`` is the model's id for the child (``t1``...).
    """

    id: str
    agent: Agent[Any]
    prompt: str
    token: CancelToken
    parent_session_id: str | None
    max_turns: int
    budget: RunBudget | None
    mailbox: Mailbox
    task_id: str = ""


DeliverFn = Callable[[SubagentReport], "Awaitable[None] | None"]
"""Receives every report in detached mode (children may then outlive the parent run)."""
RunChildFn = Callable[[ChildSpec], "Awaitable[RunResult[Any]]"]
"""Runs one child and returns its result (the seam a serving layer plugs into)."""

_INSTRUCTIONS = (
    "You can run background subagents. `spawn_subagent` starts one on a self-contained prompt (it "
    "sees nothing else of this conversation) and returns its id at once; keep working, and its "
    "report arrives later as a message. `wait_subagents` waits for reports, `send_to_subagent` "
    "adds an instruction to a running one, `cancel_subagent` stops one. Before your final answer, "
    "wait for the subagents you still need or cancel them."
)


@dataclass
class _Child:
    spec: ChildSpec
    task: asyncio.Task[None] | None = None
    report: SubagentReport | None = None
    pushed: int | None = None  # mailbox token of a report not yet seen by the parent
    cancelled: bool = False


_TASK_ID = re.compile(r"^t(\d+)$")


def child_key(run_id: str | None, task_id: str) -> str:
    """A child's id unique across parent runs (``ChildSpec.id``): its task id within its run's id."""
    scope = run_id or uuid.uuid4().hex
    return f"{task_id}@{scope}"


def next_task_id(taken: Iterable[str]) -> str:
    """The next ``t<n>`` after every task id in ``taken`` (ids of other shapes are ignored)."""
    numbers = [int(m.group(1)) for m in (_TASK_ID.match(t) for t in taken) if m]
    return f"t{max(numbers, default=0) + 1}"


@dataclass(eq=False)
class Subagents:
    """The plugin. ``agents`` is the catalog (empty: a clone of the current agent without plugins
    and handoffs); ``deliver`` switches to detached mode; ``run_child`` replaces the runner."""

    agents: Agent[Any] | Sequence[Agent[Any]] = ()
    deliver: DeliverFn | None = None
    run_child: RunChildFn | None = None
    max_concurrent: int = 4
    max_turns: int = 50
    budget: RunBudget | None = None
    max_result_chars: int | None = 16000
    instructions: str | None = None
    name: str = "subagents"
    checkpointer: Checkpointer | None = None
    """Optional: checkpoint each child so a crashed parent resumes its children too."""

    def __post_init__(self) -> None:
        names = [getattr(a, "name", None) for a in _as_list(self.agents)]
        twice = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
        if twice:
            raise UserError(f"Subagents: two agents named {twice[0]!r}", hint="agent names must be unique")

    def _catalog(self, ctx: RunContext[Any]) -> dict[str, Agent[Any]]:
        from ..agent import Agent, as_agent

        agents = [self.agents] if isinstance(self.agents, Agent) else list(self.agents)
        if not agents:
            parent = as_agent(ctx.agent)
            clone = dataclasses.replace(parent, name=f"{parent.name}-sub", plugins=[], handoffs=[])
            return {clone.name: clone}
        by_name: dict[str, Agent[Any]] = {}
        for agent in agents:
            if agent.name in by_name:
                raise UserError(f"Subagents: two agents named {agent.name!r}", hint="agent names must be unique")
            by_name[agent.name] = agent
        return by_name

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Per-run child table, the four tools, the status reminder and the run-end teardown."""
        if self.max_concurrent < 1:
            raise UserError("Subagents: max_concurrent must be at least 1", hint="the default is 4")
        run = _Run(self, ctx, self._catalog(ctx))
        return PluginInstance(
            tools=run.tools(),
            instructions=self.instructions if self.instructions is not None else _INSTRUCTIONS,
            view_injectors=[run.status],
            aclose=run.close,
        )


class _Run:
    """One parent run's children (per-run state, so concurrent parent runs never share it)."""

    def __init__(self, plugin: Subagents, ctx: RunContext[Any], catalog: dict[str, Agent[Any]]) -> None:
        self.plugin = plugin
        self.ctx = ctx
        self.catalog = catalog
        self.children: dict[str, _Child] = {}
        self.lost: set[str] = set()
        self.changed = asyncio.Event()
        self.recovered = False

    # ------------------------------------------------------------------ running children

    def running(self) -> list[_Child]:
        return [c for c in self.children.values() if c.report is None and not c.cancelled]

    def start(self, cid: str, agent: Agent[Any], prompt: str, ctx: RunContext[Any]) -> None:
        """Start child ``cid`` (its task id, the key of ``children``)."""
        budget = self.plugin.budget.copy() if self.plugin.budget is not None else None
        spec = ChildSpec(
            child_key(self.ctx.run_id, cid),
            agent,
            prompt,
            CancelToken(),
            ctx.session_id,
            self.plugin.max_turns,
            budget,
            Mailbox(),
            task_id=cid,
        )
        child = _Child(spec)
        self.children[cid] = child
        child.task = asyncio.get_running_loop().create_task(self._drive(child, ctx), name=f"lovia-subagent-{spec.id}")

    async def _drive(self, child: _Child, ctx: RunContext[Any]) -> None:
        spec = child.spec
        result: RunResult[Any] | None = None
        error: BaseException | None = None
        try:
            result = await self._execute(spec, ctx)
        except asyncio.CancelledError:
            child.cancelled = True
            raise
        except RunCancelled:
            child.cancelled = True  # however it was cancelled, a cancelled child sends no report
        except Exception as exc:
            error = exc
        if child.cancelled or spec.token.is_cancelled:
            child.cancelled = True
            self.changed.set()  # a waiter sees it as cancelled
            return
        if result is not None:
            ctx.usage.add(result.usage)
            text = str(result.output)
        else:
            text = f"failed: {type(error).__name__}: {error}"
        cap = self.plugin.max_result_chars
        if cap is not None and len(text) > cap:
            text = text[:cap] + f"\n[... {len(text) - cap} more characters cut ...]"
        session = result.session_id if result is not None else None
        report = SubagentReport(spec.id, spec.agent.name, spec.prompt, session, result, error, text, spec.task_id)
        child.report = report
        if self.plugin.deliver is not None:
            out = self.plugin.deliver(report)
            if asyncio.iscoroutine(out):
                await out
        else:
            child.pushed = self.ctx.mailbox.push(_render(report))
        self.changed.set()

    async def _execute(self, spec: ChildSpec, ctx: RunContext[Any]) -> RunResult[Any]:
        if self.plugin.run_child is not None:
            return await self.plugin.run_child(spec)
        from ..checkpointer import CheckpointOptions
        from ..runner import Runner

        checkpoint = None
        if self.plugin.checkpointer is not None:
            checkpoint = CheckpointOptions(self.plugin.checkpointer, f"{ctx.run_id}/{spec.task_id}")
        return await Runner.run(
            spec.agent,
            spec.prompt,
            context=ctx.deps,
            max_turns=spec.max_turns,
            budget=spec.budget,
            cancel_token=spec.token,
            mailbox=spec.mailbox,
            tracer=ctx.tracer,
            checkpoint=checkpoint,
        )

    async def close(self) -> None:
        """Bounded mode: children never outlive the run."""
        if self.plugin.deliver is not None:
            return
        for child in self.running():
            child.cancelled = True
            child.spec.token.cancel("the parent run ended")
        tasks = [c.task for c in self.children.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task

    # ------------------------------------------------------------------ after a crash

    def recover(self, entries: list[TranscriptEntry]) -> None:
        """Find spawned children without a report in the transcript; re-issue or mark them lost."""
        if self.recovered:
            return
        self.recovered = True
        reported: set[str] = set()
        spawned: dict[str, tuple[str, str]] = {}
        calls = {e.call_id: e for e in entries if isinstance(e, ToolCallEntry) and e.name == "spawn_subagent"}
        for e in entries:
            if isinstance(e, (InputEntry, ToolResultEntry)):
                body = e.content if isinstance(e, InputEntry) else e.output
                reported.update(_REPORT.findall(str(body)))
            if isinstance(e, ToolResultEntry) and e.call_id in calls:
                m = _STARTED.match(e.output)
                if m:
                    args = _args(calls[e.call_id].arguments)
                    spawned[m.group(1)] = (str(args.get("agent") or ""), str(args.get("prompt") or ""))
        for cid, (agent_name, prompt) in spawned.items():
            if cid in reported or cid in self.children:
                continue
            agent = self.catalog.get(agent_name) or next(iter(self.catalog.values()))
            if self.plugin.checkpointer is not None or self.plugin.run_child is not None:
                self.start(cid, agent, prompt, self.ctx)
            else:
                self.lost.add(cid)

    def status(self, ctx: RunContext[Any]) -> list[TranscriptEntry] | None:
        self.recover(list(ctx.entries))
        lines = [f"- {c.spec.task_id} ({c.spec.agent.name}): running" for c in self.running()]
        lines += [
            f"- {cid}: lost when this run was interrupted; spawn it again if still needed" for cid in sorted(self.lost)
        ]
        if not lines:
            return None
        text = "Background subagents:\n" + "\n".join(lines)
        return [InputEntry(role="user", content=f"<system-reminder>\n{text}\n</system-reminder>")]

    async def wait_for(self, ids: list[str] | None, timeout_seconds: float) -> str:
        """Wait until the given children (default: all) report or the timeout passes; render them."""
        wanted = [self.children[i] for i in (ids or list(self.children)) if i in self.children]
        unknown = [i for i in (ids or []) if i not in self.children]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_seconds)
        while any(c.report is None and not c.cancelled for c in wanted) and loop.time() < deadline:
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), deadline - loop.time())
        parts = []
        for c in wanted:
            if c.report is not None and c.pushed is not None and self.ctx.mailbox.remove(c.pushed):
                c.pushed = None  # withdrawn: returned here instead, so it never arrives twice
                parts.append(_render(c.report))
            elif c.report is None and not c.cancelled:
                parts.append(f"{c.spec.task_id}: still running")
            elif c.cancelled:
                parts.append(f"{c.spec.task_id}: cancelled")
        parts += [
            f"{i}: unknown or lost" + (" (lost when this run was interrupted)" if i in self.lost else "")
            for i in unknown
        ]
        return "\n\n".join(parts) or "No subagent reports pending."

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[Tool[Any]]:
        names = ", ".join(self.catalog)

        @tool(idempotent=False, reconcile=lambda args, ctx: "[tool error] the spawn was interrupted; spawn again")
        async def spawn_subagent(ctx: RunContext[Any], prompt: str, agent: str | None = None) -> str:
            """Start a background subagent on a self-contained prompt; returns its id at once."""
            self.recover(list(ctx.entries))
            if not prompt.strip():
                return "Error: the prompt is empty; give the subagent a self-contained task."
            chosen = self.catalog.get(agent) if agent else next(iter(self.catalog.values()))
            if chosen is None:
                return f"Error: no subagent named {agent!r}; available: {names}"
            if len(self.running()) >= self.plugin.max_concurrent:
                return f"Declined: {self.plugin.max_concurrent} subagents are already running; wait for one first."
            cid = next_task_id([*self.children, *self.lost, *_spawned_ids(ctx.entries)])
            self.start(cid, chosen, prompt, ctx)
            return f"Started subagent {cid} ({chosen.name}). Its report will arrive as a message."

        @tool
        async def wait_subagents(
            ctx: RunContext[Any], ids: list[str] | None = None, timeout_seconds: float = 60.0
        ) -> str:
            """Wait until the given subagents (default: all running) report, or the timeout passes."""
            self.recover(list(ctx.entries))  # a resumed parent may run this before any turn
            return await self.wait_for(ids, timeout_seconds)

        @tool
        async def send_to_subagent(id: str, message: str) -> str:
            """Add an instruction to a running subagent (it sees it at its next turn)."""
            child = self.children.get(id)
            if child is None or child.report is not None or child.cancelled:
                return f"Error: subagent {id} is not running."
            child.spec.mailbox.push(message)
            return f"Sent to {id}."

        @tool
        async def cancel_subagent(id: str) -> str:
            """Stop a running subagent; it sends no report."""
            child = self.children.get(id)
            if child is None or child.report is not None or child.cancelled:
                return f"Error: subagent {id} is not running."
            child.cancelled = True
            child.spec.token.cancel("cancelled by the parent")
            self.changed.set()
            return f"Cancelled {id}."

        return [spawn_subagent, wait_subagents, send_to_subagent, cancel_subagent]


def _as_list(agents: object) -> list[Any]:
    if isinstance(agents, (list, tuple)):
        return list(agents)
    return [] if agents is None or agents == () else [agents]


def _spawned_ids(entries: Sequence[TranscriptEntry]) -> list[str]:
    """Ids the transcript says were started (a resumed run numbers new children after them)."""
    found = (_STARTED.match(e.output) for e in entries if isinstance(e, ToolResultEntry))
    return [m.group(1) for m in found if m]


def _args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def render_report(report: SubagentReport) -> str:
    """The ``<subagent-report>`` message a parent receives for ``report``."""
    return _render(report)


def _render(report: SubagentReport) -> str:
    status = "finished" if report.error is None else "failed"
    opening = f'<subagent-report id="{report.task_id or report.id}" agent="{report.agent}" status="{status}">'
    return f"{opening}\n{report.text}\n</subagent-report>"
