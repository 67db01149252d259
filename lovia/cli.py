"""The ``lovia`` command: ``web``, ``runs``, ``sessions``, ``demo`` and ``--version``.

``runs`` and ``sessions`` inspect any SQLite store file (``--db PATH``, default
``./.lovia/lovia.db``) and print plain-text tables with aligned columns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .exceptions import LoviaError, UserError
from .transcript import InputEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict

__all__ = ["format_table", "main"]

DEFAULT_DB = "./.lovia/lovia.db"


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


def _require_db(path: str) -> None:
    if not os.path.exists(path):
        raise UserError(f"no database at {path}", hint="pass --db PATH (the file `lovia web --db` or your stores use)")


def _stores(path: str) -> tuple[Any, Any]:
    from .stores import SQLiteCheckpointer, SQLiteSession

    _require_db(path)
    return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)


def _chat_titles(path: str) -> dict[str, str]:
    """Titles from the web app's ``chat_sessions`` table, when the file has one."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return {sid: title for sid, title in conn.execute("SELECT id, title FROM chat_sessions")}
    except sqlite3.Error:
        return {}


async def _with_stores(path: str, body: Callable[[Any, Any], Coroutine[Any, Any, int]]) -> int:
    session, checkpointer = _stores(path)
    try:
        return await body(session, checkpointer)
    finally:
        await session.close()
        await checkpointer.close()


# --------------------------------------------------------------------------- runs


async def _runs_ls(args: argparse.Namespace, _s: Any, cp: Any) -> int:
    runs = await cp.list_runs(status=args.status, limit=args.limit)
    # The owner of a live run is its lease holder, "host:pid:nonce" (set by the worker driving it).
    owners = {lease.run_id: lease.owner for lease in await cp.live_leases()} if hasattr(cp, "live_leases") else {}
    rows = [
        (
            r.run_id,
            r.agent_name,
            r.status,
            r.turns,
            r.entries,
            _when(r.started_at),
            _when(r.updated_at),
            owners.get(r.run_id, ""),
        )
        for r in runs
    ]
    print(
        format_table(["run_id", "agent", "status", "turns", "entries", "started", "updated", "owner"], rows)
        if rows
        else "no runs"
    )
    return 0


async def _runs_show(args: argparse.Namespace, _s: Any, cp: Any) -> int:
    snap = await cp.load(args.run_id)
    if snap is None:
        raise UserError(f"no run {args.run_id!r} in {args.db}", hint="list them with `lovia runs ls`")
    if args.json:
        print(json.dumps(snap.to_dict(), indent=2, ensure_ascii=False, default=str))
        return 0
    from .usage import format_usage, snapshot_cost

    usage = snap.usage
    facts = [
        ("run_id", snap.run_id),
        ("agent", snap.agent_name),
        ("status", snap.status),
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


async def _runs_resume(args: argparse.Namespace, session: Any, cp: Any) -> int:
    from .checkpointer import CheckpointOptions
    from .runner import Runner
    from .web.agents import default_agents, load_app, resolve_agents

    snap = await cp.load(args.run_id)
    if snap is None:
        raise UserError(f"no run {args.run_id!r} in {args.db}", hint="list them with `lovia runs ls`")
    agent_set = resolve_agents(load_app(args.app)) if args.app else default_agents()
    agent = agent_set.agents.get(snap.agent_name) or agent_set.agents[agent_set.default]
    options = CheckpointOptions(cp, args.run_id, if_run_exists="resume_only")
    kwargs: dict[str, Any] = {"session": session, "session_id": args.session_id} if args.session_id else {}
    result = await Runner.run(agent, [], checkpoint=options, **kwargs)
    note = " (replayed: the run had already completed)" if result.replayed else ""
    print(f"run {args.run_id} finished{note}: {result.turns} turns, {result.usage.total_tokens} tokens")
    print(result.output if isinstance(result.output, str) else json.dumps(result.output, default=str))
    return 0


async def _runs_rm(args: argparse.Namespace, _s: Any, cp: Any) -> int:
    for run_id in args.run_ids:
        existed = await cp.load(run_id) is not None
        await cp.delete(run_id)
        print(f"{'deleted' if existed else 'not found'}: {run_id}")
    return 0


# --------------------------------------------------------------------------- sessions


async def _sessions_ls(args: argparse.Namespace, session: Any, _c: Any) -> int:
    infos = await session.list_sessions(limit=args.limit, query=args.query)
    titles = _chat_titles(args.db)
    rows = [
        (i.session_id, _clip(titles.get(i.session_id, ""), 40), i.runs, i.entries, _when(i.updated_at)) for i in infos
    ]
    print(format_table(["session_id", "title", "runs", "entries", "updated"], rows) if rows else "no sessions")
    return 0


async def _sessions_show(args: argparse.Namespace, session: Any, _c: Any) -> int:
    segments = await session.segments(args.session_id)
    if not segments:
        raise UserError(f"no session {args.session_id!r} in {args.db}", hint="list them with `lovia sessions ls`")
    from .usage import segment_summary, session_summary

    print(f"session {args.session_id}: {session_summary(s.meta for s in segments)}")
    print()
    start = 0
    for seg in segments:
        timing = (seg.meta or {}).get("timing") or {}
        stopped = " (stopped)" if (seg.meta or {}).get("stopped") else ""
        print(f"run {seg.run_id}{stopped}  {len(seg.entries)} entries  {_when(timing.get('finished_at'))}")
        print(f"  {segment_summary(seg.meta)}")
        print(_entries_table(seg.entries, start))
        print()
        start += len(seg.entries)
    return 0


async def _sessions_export(args: argparse.Namespace, session: Any, _c: Any) -> int:
    entries = await session.load(args.session_id)
    if args.format == "json":
        print(json.dumps([entry_to_dict(e) for e in entries], indent=2, ensure_ascii=False, default=str))
    else:
        from .web.routes_sessions import transcript_markdown

        print(transcript_markdown(_chat_titles(args.db).get(args.session_id, args.session_id), entries), end="")
    return 0


async def _sessions_trim(args: argparse.Namespace, session: Any, _c: Any) -> int:
    trimmed = await session.trim_tool_results(args.session_id, keep_chars=args.keep_chars, keep_runs=args.keep_runs)
    print(f"trimmed {trimmed} tool result(s) in {args.session_id}")
    return 0


async def _sessions_rewind(args: argparse.Namespace, session: Any, cp: Any) -> int:
    segments = await session.segments(args.session_id)
    removed = await session.rewind(args.session_id, keep_entries=args.keep_entries)
    start = 0
    for seg in segments:  # a rewound run's checkpoint must go too, or a resume would replay the tail
        start += len(seg.entries)
        if start > args.keep_entries:
            await cp.delete(seg.run_id)
    print(
        f"removed {removed} entr{'y' if removed == 1 else 'ies'}; {args.session_id} keeps {min(args.keep_entries, start)}"
    )
    return 0


# --------------------------------------------------------------------------- parser


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", default=os.environ.get("LOVIA_DB", DEFAULT_DB), help="SQLite store file (default %(default)s)"
    )


def _web_parser(sub: Any) -> None:
    web = sub.add_parser("web", help="serve the chat web app", description="Serve the chat web app (needs lovia[web]).")
    web.add_argument(
        "--host", default=os.environ.get("LOVIA_HOST", "127.0.0.1"), help="bind address (default %(default)s)"
    )
    web.add_argument(
        "--port", type=int, default=int(os.environ.get("LOVIA_PORT", "8000")), help="port (default %(default)s)"
    )
    _add_db(web)
    web.add_argument("--app", default=os.environ.get("LOVIA_APP"), help="serve your own agent(s): module:attr")
    web.add_argument(
        "--token", default=os.environ.get("LOVIA_WEB_TOKEN"), help="API token (generated for non-loopback binds)"
    )
    web.add_argument("--title", default="lovia", help="page title")
    web.add_argument("--max-turns", type=int, default=50, help="turn limit per run")
    web.add_argument("--log-level", default="info", help="uvicorn log level")
    web.add_argument(
        "--check", action="store_true", help="probe the configured model endpoint(s) and exit (does not serve)"
    )


def _runs_parser(sub: Any) -> None:
    runs = sub.add_parser("runs", help="inspect checkpointed runs").add_subparsers(dest="action", required=True)
    ls = runs.add_parser("ls", help="list runs")
    ls.add_argument("--status", choices=["running", "interrupted", "completed", "failed"])
    ls.add_argument("--limit", type=int, default=50)
    show = runs.add_parser("show", help="one run's head and entries")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    resume = runs.add_parser("resume", help="continue an interrupted run (or replay a completed one)")
    resume.add_argument("run_id")
    resume.add_argument("--app", help="module:attr of the agent(s) the run belongs to")
    resume.add_argument("--session-id", help="also record the run in this session")
    rm = runs.add_parser("rm", help="delete run checkpoints")
    rm.add_argument("run_ids", nargs="+")
    for p in (ls, show, resume, rm):
        _add_db(p)


def _sessions_parser(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="inspect sessions").add_subparsers(dest="action", required=True)
    ls = sessions.add_parser("ls", help="list sessions")
    ls.add_argument("--query", "-q", help="substring of the session id")
    ls.add_argument("--limit", type=int, default=50)
    show = sessions.add_parser("show", help="a session's runs and entries")
    show.add_argument("session_id")
    export = sessions.add_parser("export", help="print a session as Markdown or JSON")
    export.add_argument("session_id")
    export.add_argument("--format", choices=["md", "json"], default="md")
    trim = sessions.add_parser("trim", help="truncate old tool outputs")
    trim.add_argument("session_id")
    trim.add_argument("--keep-chars", type=int, default=400)
    trim.add_argument("--keep-runs", type=int, default=1)
    rewind = sessions.add_parser("rewind", help="drop the transcript's tail")
    rewind.add_argument("session_id")
    rewind.add_argument("--keep-entries", type=int, required=True, help="entries to keep (over the flat transcript)")
    for p in (ls, show, export, trim, rewind):
        _add_db(p)


def build_parser() -> argparse.ArgumentParser:
    """The ``lovia`` argument parser."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="lovia", description="lovia: an agent runtime whose spine is durable state.")
    parser.add_argument("--version", action="version", version=f"lovia {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{web,runs,sessions,eval,demo}")
    _web_parser(sub)
    _runs_parser(sub)
    _sessions_parser(sub)
    from .eval.cli import add_eval_parser

    add_eval_parser(sub)
    demo = sub.add_parser("demo", help="watch a run get killed mid-tool and resume (offline)")
    demo.add_argument("--fast", action="store_true", help="shorter pauses")
    return parser


_ACTIONS: dict[tuple[str, str], Callable[[argparse.Namespace, Any, Any], Coroutine[Any, Any, int]]] = {
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


def _run_web(args: argparse.Namespace) -> int:
    from .web.agents import load_app
    from .web.server import serve

    agents = load_app(args.app) if args.app else None
    serve(
        agents,
        host=args.host,
        port=args.port,
        db_path=args.db,
        token=args.token,
        title=args.title,
        max_turns=args.max_turns,
        log_level=args.log_level,
    )
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "web":
        if args.check:
            from .web.check import run_check

            return run_check(args.app)
        return _run_web(args)
    if args.command == "eval":
        from .eval.cli import run_eval

        return run_eval(args)
    if args.command == "demo":
        from .web.crashdemo import run_demo

        return run_demo(fast=args.fast)
    action = _ACTIONS[(args.command, args.action)]
    return asyncio.run(_with_stores(args.db, lambda s, c: action(args, s, c)))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lovia`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except LoviaError as exc:
        print(f"lovia: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
