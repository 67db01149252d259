"""``lovia web``: the command's flags and what it runs (also ``python -m lovia.web``).

The ``lovia`` command (:mod:`lovia.cli`) registers this subcommand from here; the web package
itself never imports the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..exceptions import LoviaError, UserError
from .builder import (
    resolve_followups,
    resolve_instructions,
    resolve_max_retries,
    resolve_max_runs,
    resolve_max_tokens,
    resolve_max_turns,
    resolve_provider_timeout,
    resolve_run_queue,
)

__all__ = [
    "DEFAULT_DB",
    "add_db_argument",
    "add_web_parser",
    "check_model_flags",
    "main",
    "resolve_followups",
    "run_web",
]

DEFAULT_DB = "./.lovia/lovia.db"
"""The store file ``lovia web``, ``lovia runs`` and ``lovia sessions`` use unless given ``--db``."""


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--db PATH`` flag (``LOVIA_DB`` in the environment sets its default)."""
    parser.add_argument(
        "--db",
        default=os.environ.get("LOVIA_DB", DEFAULT_DB),
        help="SQLite store file, or postgresql://USER@HOST/DB (default %(default)s)",
    )


def add_web_parser(sub: Any) -> argparse.ArgumentParser:
    """Register the ``web`` subcommand on an ``add_subparsers()`` object."""
    web: argparse.ArgumentParser = sub.add_parser(
        "web",
        help="serve the chat web app",
        description="Serve the chat web app (needs lovia[web]).",
        epilog="`lovia web init-ui DIR` starts a folder for ChatUI(assets=DIR): a template, a theme, a script.",
    )
    web.add_argument(
        "--host", default=os.environ.get("LOVIA_HOST", "127.0.0.1"), help="bind address (default %(default)s)"
    )
    web.add_argument(
        "--port", type=int, default=int(os.environ.get("LOVIA_PORT", "8000")), help="port (default %(default)s)"
    )
    web.add_argument(
        "--db",
        default=os.environ.get("LOVIA_DB"),
        help="SQLite store file, or postgresql://USER@HOST/DB (default ./.lovia/<agent>.db with --app, named after "
        f"its default agent; else {DEFAULT_DB})",
    )
    web.add_argument(
        "--db-schema",
        default=os.environ.get("LOVIA_DB_SCHEMA"),
        help="PostgreSQL schema of every table (with a postgresql:// --db; default: the search path)",
    )
    web.add_argument(
        "--lease-ttl",
        type=float,
        default=float(os.environ.get("LOVIA_LEASE_TTL", "10")),
        help="seconds a replica's lease on a run lasts; a dead replica's runs move on after it (default %(default)s)",
    )
    web.add_argument("--app", default=os.environ.get("LOVIA_APP"), help="serve your own agent(s): module:attr")
    web.add_argument(
        "--token", default=os.environ.get("LOVIA_WEB_TOKEN"), help="API token (generated for non-loopback binds)"
    )
    web.add_argument(
        "--allowed-host",
        action="append",
        default=[n for n in os.environ.get("LOVIA_ALLOWED_HOSTS", "").split(",") if n.strip()],
        metavar="NAME",
        help="also answer requests for this host name (repeatable; '.example.com' = its subdomains)",
    )
    web.add_argument(
        "--root-path",
        default=os.environ.get("LOVIA_ROOT_PATH", ""),
        metavar="PREFIX",
        help="path prefix a reverse proxy serves the app under and strips, e.g. /lovia (default: none)",
    )
    web.add_argument("--title", default="lovia", help="page title")
    web.add_argument(
        "--model",
        metavar="MODEL",
        help="the default agent's model, e.g. openai:gpt-4.1-mini or anthropic:<model> (env LOVIA_MODEL; "
        "without either, a model saved in Settings, else an offline demo model)",
    )
    web.add_argument("--max-turns", metavar="N", help="turn limit per run (env LOVIA_MAX_TURNS; default 50)")
    web.add_argument(
        "--max-runs",
        metavar="N",
        help="runs live at once; past it a new chat waits for a free slot (env LOVIA_MAX_RUNS; default 8)",
    )
    web.add_argument(
        "--run-queue",
        metavar="N",
        help="chats that may wait for a free slot; past it a new chat is refused with 429 (env LOVIA_RUN_QUEUE; "
        "default 4 x --max-runs; 0: none wait)",
    )
    web.add_argument(
        "--max-tokens",
        metavar="N",
        help="output token limit per model call of the default agent (env LOVIA_MAX_TOKENS; default: the "
        "provider's; a max_tokens in a profile's extra request fields wins)",
    )
    web.add_argument(
        "--max-retries",
        metavar="N",
        help="retries of a failed model call of the default agent (env LOVIA_MAX_RETRIES; default 4)",
    )
    web.add_argument(
        "--provider-timeout",
        metavar="SECONDS",
        help="seconds one model request may take (env LOVIA_PROVIDER_TIMEOUT; default 300)",
    )
    web.add_argument(
        "--trust-env",
        action="store_true",
        help="let model requests use the HTTP(S)_PROXY / NO_PROXY variables (env LOVIA_PROVIDER_TRUST_ENV=1)",
    )
    told = web.add_mutually_exclusive_group()
    told.add_argument("--instructions", metavar="TEXT", help="the default agent's instructions, replacing the built-in")
    told.add_argument(
        "--instructions-file",
        metavar="PATH",
        help="a Markdown file appended to the built-in instructions (env LOVIA_INSTRUCTIONS_FILE; default "
        "AGENTS.md when present)",
    )
    web.add_argument("--log-level", default="info", help="uvicorn log level")
    where = web.add_mutually_exclusive_group()
    where.add_argument("--workspace", metavar="DIR", help="the agent's workspace folder (default: the current folder)")
    where.add_argument("--no-workspace", action="store_true", help="serve the agent without file and shell tools")
    mode = web.add_mutually_exclusive_group()
    mode.add_argument(
        "--readonly", action="store_const", const="readonly", dest="workspace_mode", help="no writes, no shell"
    )
    mode.add_argument(
        "--trusted", action="store_const", const="trusted", dest="workspace_mode", help="run commands unasked"
    )
    web.add_argument(
        "--no-followups",
        action="store_true",
        help="do not suggest follow-up questions (each suggestion costs a model call; env LOVIA_FOLLOWUPS=0)",
    )
    web.add_argument(
        "--no-subagents",
        action="store_true",
        help="do not give the built-in agent background subagents (spawn_subagent and friends)",
    )
    web.add_argument(
        "--check", action="store_true", help="probe the configured model endpoint(s) and exit (does not serve)"
    )
    return web


def run_web(args: argparse.Namespace) -> int:
    """Serve the app (or, with ``--check``, probe the model endpoints); the exit status."""
    max_turns = check_model_flags(args)
    max_runs = resolve_max_runs(getattr(args, "max_runs", None))
    run_queue = resolve_run_queue(getattr(args, "run_queue", None))
    if args.check:
        return _check(args)
    from .agents import load_app
    from .server import serve
    from .store import PostgresChatStore, is_postgres_url
    from .workspaces import served_with_workspace

    store = None
    # Without --db, an --app is served from ./.lovia/<agent>.db (create_app names it), the built-in
    # assistant from DEFAULT_DB.
    db = args.db if args.db is not None or args.app else DEFAULT_DB
    if db is not None and is_postgres_url(db):
        if args.lease_ttl <= 0:
            raise UserError(f"--lease-ttl must be positive, got {args.lease_ttl}", hint="e.g. --lease-ttl 10")
        store = PostgresChatStore(db, schema=args.db_schema, lease_ttl=args.lease_ttl)
    runtime = None
    if args.app:
        agents = served_with_workspace(load_app(args.app), args)
    else:
        from .config import ConfigRuntime, load_active

        runtime = ConfigRuntime(args=args, loaded=load_active(), store=store)
        agents = {runtime.agent_key: runtime.agent}
    serve(
        agents,
        host=args.host,
        port=args.port,
        store=store,
        db_path=None if store is not None else db,
        token=args.token,
        title=args.title,
        max_turns=max_turns,
        log_level=args.log_level,
        allowed_hosts=args.allowed_host,
        root_path=args.root_path,
        followups=resolve_followups(args.no_followups),
        config_runtime=runtime,
        max_background_runs=max_runs,
        max_queued_runs=run_queue,
    )
    return 0


_DEFAULT_AGENT_FLAGS = ("model", "max_tokens", "max_retries", "instructions", "instructions_file")


def check_model_flags(args: argparse.Namespace) -> int:
    """Validate the model and agent flags before anything starts; the turn limit.

    ``--provider-timeout`` and ``--trust-env`` are exported as ``LOVIA_PROVIDER_TIMEOUT`` /
    ``LOVIA_PROVIDER_TRUST_ENV``, so every provider this process builds (the default agent's,
    a model string of an ``--app`` agent, the follow-up suggester) honours them.

    Raises:
        UserError: A value is not usable, or a default-agent flag is combined with ``--app``.
    """
    max_turns = resolve_max_turns(getattr(args, "max_turns", None))
    timeout = resolve_provider_timeout(getattr(args, "provider_timeout", None))
    if timeout is not None:
        os.environ["LOVIA_PROVIDER_TIMEOUT"] = f"{timeout:g}"
    if getattr(args, "trust_env", False):
        os.environ["LOVIA_PROVIDER_TRUST_ENV"] = "1"
    if getattr(args, "model", None) and not getattr(args, "app", None):
        os.environ["LOVIA_MODEL"] = args.model.strip()  # read where the default agent is built
    if getattr(args, "app", None):
        given = [f"--{name.replace('_', '-')}" for name in _DEFAULT_AGENT_FLAGS if getattr(args, name, None)]
        if given:
            raise UserError(
                f"{', '.join(given)} configure the default agent, not an --app agent",
                hint="set them on your Agent (model=, settings=ModelSettings(max_tokens=...), retry=, instructions=)",
            )
        return max_turns
    resolve_max_tokens(getattr(args, "max_tokens", None))
    resolve_max_retries(getattr(args, "max_retries", None))
    resolve_instructions(getattr(args, "instructions", None), getattr(args, "instructions_file", None))
    return max_turns


def _check(args: argparse.Namespace) -> int:
    """``--check``: the configured chat profile when there is one, else the agents as served."""
    if not args.app and not getattr(args, "model", None):
        from .config import load_active
        from .config.schema import Connection

        profile = load_active().config.default_profile()
        if profile is not None:
            from .. import __version__
            from .config import run_check as run_config_check

            return run_config_check(Connection.from_profile(profile), version=__version__)
    from .check import run_check

    return run_check(args.app)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lovia.web [flags]``: the same as ``lovia web [flags]`` (and ``init-ui DIR``)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["init-ui"]:
        from .scaffold import main as init_ui

        return init_ui(words[1:], prog="lovia web init-ui")
    parser = argparse.ArgumentParser(prog="lovia", description="lovia: an agent runtime whose spine is durable state.")
    add_web_parser(parser.add_subparsers(dest="command", required=True, metavar="{web}"))
    args = parser.parse_args(["web", *words])
    try:
        return run_web(args)
    except LoviaError as exc:
        print(f"lovia: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
