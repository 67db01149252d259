"""The ``lovia`` command: ``web``, ``runs``, ``sessions``, ``demo`` and ``--version``.

``runs`` and ``sessions`` inspect any SQLite store file (``--db PATH``, default
``./.lovia/lovia.db``) or PostgreSQL schema (``--db postgresql://USER@HOST/DB --db-schema NAME``)
and print plain-text tables with aligned columns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from ._cli_stores import NotFound, Stores, open_stores
from ._owners import owner_alive
from .exceptions import LoviaError, UserError
from .transcript import InputEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict
from .web.command import DEFAULT_DB

__all__ = ["NotFound", "effective_status", "format_table", "main", "owner_alive"]

STALE_AFTER = 600.0
"""Seconds without a save after which a lease-less ``running`` run counts as interrupted."""


# --------------------------------------------------------------------------- formatting


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain-text table: a header, a rule, and one line per row, columns padded to align."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else ""


def _clip(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _summary(entry: TranscriptEntry) -> tuple[str, str]:
    if isinstance(entry, InputEntry):
        return entry.role, _clip(entry.text)
    if isinstance(entry, ToolCallEntry):
        return "tool_call", _clip(f"{entry.name}({entry.arguments}) [{entry.call_id}]")
    if isinstance(entry, ToolResultEntry):
        return "tool_result" + (" (error)" if entry.is_error else ""), _clip(f"[{entry.call_id}] {entry.output}")
    if isinstance(entry, ReasoningEntry):
        return "reasoning", _clip(entry.content)
    return "assistant", _clip(entry.content)


def _entries_table(entries: Sequence[TranscriptEntry], start: int = 0) -> str:
    return format_table(["#", "kind", "content"], [(start + i, *_summary(e)) for i, e in enumerate(entries)])


# --------------------------------------------------------------------------- stores


def _schema(args: argparse.Namespace) -> str | None:
    """``--db-schema``; ``LOVIA_DB_SCHEMA`` counts only with a PostgreSQL ``--db`` (an SQLite file has none)."""
    from .stores._dsn import is_postgres_url

    given = getattr(args, "db_schema", None)
    if given is None and is_postgres_url(args.db):
        given = os.environ.get("LOVIA_DB_SCHEMA") or None
    return str(given) if given is not None else None


async def _with_stores(args: argparse.Namespace, body: Callable[[Stores], Coroutine[Any, Any, int]]) -> int:
    stores = await open_stores(args.db, _schema(args))
    args.where = stores.where
    try:
        stores.require("checkpoint" if args.command == "runs" else "session")
        return await body(stores)
    finally:
        await stores.close()


# --------------------------------------------------------------------------- runs


def effective_status(
    status: str, updated_at: float, lease_expires: float | None, *, now: float, owner: str | None = None
) -> tuple[str, str]:
    """What a listed run really is, and why: a ``running`` run whose owner is gone is ``interrupted``.

    The owner is gone when its lease expired, when the ``lovia web`` process that started it
    (``owner``, ``host:pid`` on this host) no longer runs, or (for a run with neither) when
    nothing was saved for :data:`STALE_AFTER` seconds.
    """
    if status != "running":
        return status, ""
    if lease_expires is not None:
        return ("running", "lease held") if lease_expires > now else ("interrupted", "lease expired")
    alive = owner_alive(owner) if owner else None
    if alive is not None:
        return ("running", f"server {owner}") if alive else ("interrupted", f"server {owner} is gone")
    if now - updated_at > STALE_AFTER:
        return "interrupted", f"no save for {int((now - updated_at) // 60)} min"
    return "running", ""


async def _failure_note(cp: Any, run_id: str) -> str:
    snap = await cp.load(run_id)
    error = snap.error if snap is not None else None
    return _clip(f"{error.get('type')}: {error.get('message')}", 60) if error else ""


async def _runs_ls(args: argparse.Namespace, st: Stores) -> int:
    cp = st.checkpointer
    leases, owners, now = await st.leases(), await st.web_owners(), time.time()
    wanted = args.status
    fetch = None if wanted in ("running", "interrupted") else wanted
    runs = await cp.list_runs(status=fetch, limit=args.limit if fetch else 10_000)
    # The owner of a live run is its lease holder, "host:pid:nonce" (set by the worker driving it).
    holders = {lease.run_id: lease.owner for lease in await cp.live_leases()} if hasattr(cp, "live_leases") else {}
    rows = []
    for r in runs:
        lease = leases.get(r.run_id)
        status, why = effective_status(r.status, r.updated_at, lease, now=now, owner=owners.get(r.run_id))
        if r.damaged:
            status, why = "DAMAGED", r.damaged
        if wanted is not None and status != wanted:
            continue
        if status == "failed":
            why = await _failure_note(cp, r.run_id)
        owner = holders.get(r.run_id) or owners.get(r.run_id, "")
        started, updated = _when(r.started_at), _when(r.updated_at)
        rows.append((r.run_id, r.agent_name, status, r.turns, r.entries, started, updated, owner, why))
        if len(rows) >= args.limit:
            break
    headers = ["run_id", "agent", "status", "turns", "entries", "started", "updated", "owner", "note"]
    print(format_table(headers, rows) if rows else "no runs" + (f" with status {wanted}" if wanted else ""))
    _print_damaged((r.run_id, r.damaged) for r in runs)
    return 0


def _missing_run(args: argparse.Namespace, run_id: str) -> NotFound:
    return NotFound(f"no run {run_id!r} in {args.where}", hint="list them with `lovia runs ls`")


def _print_damaged(rows: Iterable[tuple[str, str | None]]) -> None:
    """After a listing: one line per damaged row (its id, what is wrong, the hint), on stderr."""
    for ident, damaged in rows:
        if damaged:
            print(f"damaged: {ident}: {damaged}", file=sys.stderr)


async def _runs_show(args: argparse.Namespace, st: Stores) -> int:
    snap = await st.checkpointer.load(args.run_id)
    if snap is None:
        raise _missing_run(args, args.run_id)
    if args.json:
        print(json.dumps(snap.to_dict(), indent=2, ensure_ascii=False, default=str))
        return 0
    from .usage import format_usage, snapshot_cost

    usage = snap.usage
    # The same reading as `runs ls`: a `running` run whose lease or owner is gone is interrupted.
    leases, owners = await st.leases(), await st.web_owners()
    status, why = effective_status(
        snap.status, snap.updated_at, leases.get(snap.run_id), now=time.time(), owner=owners.get(snap.run_id)
    )
    facts = [
        ("run_id", snap.run_id),
        ("agent", snap.agent_name),
        ("status", f"{status} ({why})" if why else status),
        ("turns", snap.turns),
        ("usage", format_usage(usage)),
        ("cost", str(snapshot_cost(snap))),
        ("started", _when(snap.started_at)),
        ("updated", _when(snap.updated_at)),
    ]
    if snap.error:
        facts.append(("error", f"{snap.error.get('type')}: {snap.error.get('message')}"))
    print(format_table(["field", "value"], facts))
    print()
    print(_entries_table(snap.entries))
    return 0


def _resume_agent(args: argparse.Namespace, agent_name: str) -> Any:
    """The agent named ``agent_name`` in ``--app`` (or the built-in agents); a clear error otherwise."""
    from .agent import Agent
    from .web.agents import default_agents, load_app, resolve_agents

    target = load_app(args.app) if args.app else None
    if callable(target) and not isinstance(target, Agent):
        target = target()  # a factory: `module:make_agents`
    agent_set = resolve_agents(target) if target is not None else default_agents()
    agent = agent_set.agents.get(agent_name)
    if agent is not None:
        return agent
    where = f"--app {args.app}" if args.app else "the built-in agents (no --app given)"
    known = ", ".join(sorted(agent_set.agents)) or "none"
    raise UserError(
        f"run {args.run_id!r} was made by agent {agent_name!r}, which is not in {where} (found: {known})",
        hint="pass --app module:attr naming that Agent (or a dict of agents), e.g. the module your program "
        "builds it in; for `lovia demo` runs: --app lovia.web.crashdemo:demo_agents",
    )


async def _runs_resume(args: argparse.Namespace, st: Stores) -> int:
    from . import events as ev
    from .checkpointer import CheckpointOptions
    from .runner import Runner

    snap = await st.checkpointer.load(args.run_id)
    if snap is None:
        raise _missing_run(args, args.run_id)
    agent = _resume_agent(args, snap.agent_name)
    options = CheckpointOptions(st.checkpointer, args.run_id, if_run_exists="resume_only")
    kwargs: dict[str, Any] = {"session": st.session, "session_id": args.session_id} if args.session_id else {}
    print(
        f"resuming run {args.run_id} (agent {snap.agent_name}, {len(snap.entries)} stored entries)...", file=sys.stderr
    )
    handle = Runner.stream(agent, [], checkpoint=options, **kwargs)
    async for event in handle:
        if isinstance(event, ev.TurnStarted):
            print(f"  turn {event.turn}...", file=sys.stderr, flush=True)
        elif isinstance(event, ev.ToolCallStarted):
            print(f"  tool {event.call.name}", file=sys.stderr, flush=True)
    result = await handle.result()
    note = " (replayed: the run had already completed)" if result.replayed else ""
    print(f"run {args.run_id} finished{note}: {result.turns} turns, {result.usage.total_tokens} tokens")
    print(result.output if isinstance(result.output, str) else json.dumps(result.output, default=str))
    return 0


async def _runs_rm(args: argparse.Namespace, st: Stores) -> int:
    cp, missing = st.checkpointer, []
    for run_id in args.run_ids:
        if await cp.load(run_id) is None:
            missing.append(run_id)
            print(f"not found: {run_id}", file=sys.stderr)
            continue
        await cp.delete(run_id)
        print(f"deleted: {run_id}")
    return 1 if missing else 0


# --------------------------------------------------------------------------- sessions


async def _sessions_ls(args: argparse.Namespace, st: Stores) -> int:
    infos = await st.session.list_sessions(limit=args.limit, query=args.query)
    titles = await st.chat_titles()
    rows = [
        (i.session_id, _clip(titles.get(i.session_id, ""), 40), i.runs, i.entries, _when(i.updated_at)) for i in infos
    ]
    print(format_table(["session_id", "title", "runs", "entries", "updated"], rows) if rows else "no sessions")
    _print_damaged((i.session_id, i.damaged) for i in infos)
    return 0


async def _require_session(args: argparse.Namespace, session: Any) -> list[Any]:
    segments = await session.segments(args.session_id)
    if not segments:
        raise NotFound(f"no session {args.session_id!r} in {args.where}", hint="list them with `lovia sessions ls`")
    return list(segments)


async def _sessions_show(args: argparse.Namespace, st: Stores) -> int:
    segments = await _require_session(args, st.session)
    from .usage import segment_summary, session_summary

    print(f"session {args.session_id}: {session_summary(s.meta for s in segments)}")
    print()
    start = 0
    for seg in segments:
        meta = seg.meta or {}
        timing = meta.get("timing") or {}
        mark = " (stopped)" if meta.get("stopped") else " (failed)" if meta.get("failed") else ""
        print(f"run {seg.run_id}{mark}  {len(seg.entries)} entries  {_when(timing.get('finished_at'))}")
        print(f"  {segment_summary(seg.meta)}")
        if meta.get("error"):
            print(f"  error: {meta['error'].get('type')}: {meta['error'].get('message')}")
        print(_entries_table(seg.entries, start))
        print()
        start += len(seg.entries)
    return 0


async def _sessions_export(args: argparse.Namespace, st: Stores) -> int:
    await _require_session(args, st.session)
    entries = await st.session.load(args.session_id)
    if args.format == "json":
        print(json.dumps([entry_to_dict(e) for e in entries], indent=2, ensure_ascii=False, default=str))
    else:
        from .transcript import entries_to_messages
        from .web.serialization import drop_system_entries, export_md

        title = (await st.chat_titles()).get(args.session_id, args.session_id)
        msgs = entries_to_messages(drop_system_entries(entries))
        print(export_md(msgs, title=title, session_id=args.session_id), end="")
    return 0


async def _sessions_trim(args: argparse.Namespace, st: Stores) -> int:
    await _require_session(args, st.session)
    trimmed = await st.session.trim_tool_results(args.session_id, keep_chars=args.keep_chars, keep_runs=args.keep_runs)
    print(f"trimmed {trimmed} tool result(s) in {args.session_id}")
    return 0


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


async def _sessions_rewind(args: argparse.Namespace, st: Stores) -> int:
    session, cp = st.session, st.checkpointer
    segments = await _require_session(args, session)
    removed = await session.rewind(args.session_id, keep_entries=args.keep_entries)
    dropped, start = [], 0
    for seg in segments:  # a rewound run's checkpoint must go too, or a resume would replay the tail
        start += len(seg.entries)
        if start > args.keep_entries and await cp.load(seg.run_id) is not None:
            await cp.delete(seg.run_id)
            dropped.append(seg.run_id)
    kept = len(await session.load(args.session_id))
    print(f"removed {_plural(removed, 'entry', 'entries')} from {args.session_id}; it now has {kept}")
    if kept < args.keep_entries < start:
        print("  (the cut fell inside a run: a tool call without its result was dropped too)")
    for run_id in dropped:
        print(f"removed checkpoint of run {run_id} (a resume would have replayed the removed tail)")
    return 0


# --------------------------------------------------------------------------- parser


def _add_db(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    # Accepted before the command (`lovia --db F runs ls`) and after it; the later one wins.
    parser.add_argument(
        "--db",
        default=os.environ.get("LOVIA_DB", DEFAULT_DB) if top else argparse.SUPPRESS,
        help="SQLite store file or postgresql://USER@HOST/DB (env LOVIA_DB; default %(default)s)"
        if top
        else "SQLite store file or postgresql://USER@HOST/DB (as lovia --db)",
    )
    parser.add_argument(
        "--db-schema",
        default=None if top else argparse.SUPPRESS,
        metavar="NAME",
        help="PostgreSQL schema of the stores, with a postgresql:// --db (env LOVIA_DB_SCHEMA; default: the search "
        "path)"
        if top
        else "PostgreSQL schema of the stores (as lovia --db-schema)",
    )


def _count(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    """argparse type: a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _web_parser(sub: Any) -> None:
    from . import __version__
    from .web.command import add_web_parser

    web = add_web_parser(sub)
    web.add_argument("--version", action="version", version=f"lovia {__version__}")


def _runs_parser(sub: Any) -> None:
    runs = sub.add_parser("runs", help="inspect checkpointed runs").add_subparsers(dest="action", required=True)
    ls = runs.add_parser("ls", help="list runs, newest first")
    ls.add_argument(
        "--status",
        choices=["running", "interrupted", "completed", "failed"],
        help="only runs with this status (a 'running' run whose lease or owner is gone counts as interrupted)",
    )
    ls.add_argument("--limit", type=_count, default=50, help="at most this many rows (default %(default)s)")
    show = runs.add_parser("show", help="one run's head and entries")
    show.add_argument("run_id", help="the run's id (see `lovia runs ls`)")
    show.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    resume = runs.add_parser("resume", help="continue an interrupted run (or replay a completed one)")
    resume.add_argument("run_id", help="the run's id (see `lovia runs ls`)")
    resume.add_argument(
        "--app", help="module:attr of the Agent, dict of agents, or a function returning one, that made the run"
    )
    resume.add_argument("--session-id", help="also record the run in this session")
    rm = runs.add_parser("rm", help="delete run checkpoints (exit 1 if any was not found)")
    rm.add_argument("run_ids", nargs="+", metavar="run_id", help="ids to delete")
    for p in (ls, show, resume, rm):
        _add_db(p)


def _sessions_parser(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="inspect sessions").add_subparsers(dest="action", required=True)
    ls = sessions.add_parser("ls", help="list sessions, most recently updated first")
    ls.add_argument("--query", "-q", help="only sessions whose id contains this text")
    ls.add_argument("--limit", type=_count, default=50, help="at most this many rows (default %(default)s)")
    show = sessions.add_parser("show", help="a session's runs and entries")
    show.add_argument("session_id", help="the session's id (see `lovia sessions ls`)")
    export = sessions.add_parser("export", help="print a session as Markdown or JSON")
    export.add_argument("session_id", help="the session's id")
    export.add_argument("--format", choices=["md", "json"], default="md", help="output format (default %(default)s)")
    trim = sessions.add_parser("trim", help="truncate old tool outputs")
    trim.add_argument("session_id", help="the session's id")
    trim.add_argument(
        "--keep-chars", type=_non_negative, default=400, help="characters kept per output (default %(default)s)"
    )
    trim.add_argument(
        "--keep-runs", type=_non_negative, default=1, help="latest runs left untouched (default %(default)s)"
    )
    rewind = sessions.add_parser("rewind", help="drop the transcript's tail (and the checkpoints of the runs it cuts)")
    rewind.add_argument("session_id", help="the session's id")
    rewind.add_argument(
        "--keep-entries", type=_non_negative, required=True, help="entries to keep, counted over the whole transcript"
    )
    for p in (ls, show, export, trim, rewind):
        _add_db(p)


def build_parser() -> argparse.ArgumentParser:
    """The ``lovia`` argument parser."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="lovia", description="lovia: an agent runtime whose spine is durable state.")
    parser.add_argument("--version", action="version", version=f"lovia {__version__}")
    _add_db(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{web,runs,sessions,db,eval,demo}")
    _web_parser(sub)
    _runs_parser(sub)
    _sessions_parser(sub)
    from ._cli_db import add_db_parser

    add_db_parser(sub)
    from .eval.cli import add_eval_parser

    add_eval_parser(sub)
    demo = sub.add_parser("demo", help="watch a run get killed mid-tool and resume (offline)")
    demo.add_argument("--fast", action="store_true", help="shorter pauses")
    demo.add_argument(
        "--db", default=argparse.SUPPRESS, help="where the demo keeps its store (default ./.lovia/demo/demo.db)"
    )
    return parser


_ACTIONS: dict[tuple[str, str], Callable[[argparse.Namespace, Stores], Coroutine[Any, Any, int]]] = {
    ("runs", "ls"): _runs_ls,
    ("runs", "show"): _runs_show,
    ("runs", "resume"): _runs_resume,
    ("runs", "rm"): _runs_rm,
    ("sessions", "ls"): _sessions_ls,
    ("sessions", "show"): _sessions_show,
    ("sessions", "export"): _sessions_export,
    ("sessions", "trim"): _sessions_trim,
    ("sessions", "rewind"): _sessions_rewind,
}


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "web":
        from .web.command import run_web

        return run_web(args)
    if args.command == "db":
        from ._cli_db import run_db

        return run_db(args)
    if args.command == "eval":
        from .eval.cli import run_eval

        return run_eval(args)
    if args.command == "demo":
        from .web.crashdemo import run_demo

        return run_demo(fast=args.fast, db=args.db if args.db != DEFAULT_DB else None)
    action = _ACTIONS[(args.command, args.action)]
    return asyncio.run(_with_stores(args, lambda stores: action(args, stores)))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lovia`` console script; returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["web", "init-ui"]:  # its own small command: a positional DIR, none of web's flags
        from .web.scaffold import main as init_ui

        return init_ui(words[2:], prog="lovia web init-ui")
    if not words:  # nothing asked for: show what there is, successfully
        build_parser().print_help()
        return 0
    args = build_parser().parse_args(words)
    try:
        return _dispatch(args)
    except LoviaError as exc:
        print(f"lovia: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 1 if isinstance(exc, NotFound) else 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`lovia sessions ls | head`): stop quietly, as other Unix tools do.
        # stdout is pointed at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
