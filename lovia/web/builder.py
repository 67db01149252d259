"""The default agent of ``lovia web``, built from the command's flags and ``config.json``.

Every ``resolve_*`` function reads one setting the way the command documents it: the flag,
else the ``LOVIA_*`` environment variable, else the default. A value that is not usable raises
a :class:`~lovia.exceptions.UserError` whose hint shows a good one.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent import Agent
from ..exceptions import UserError
from ..providers import ModelSettings
from ..providers.base import Provider
from ..reliability import RetryPolicy
from .workspaces import DEFAULT_WORKSPACE_MODE, resolve_workspace, with_workspace

if TYPE_CHECKING:
    from ..plugins.memory import Memory
    from ..tools import Tool
    from ..tools.human import HumanChannel
    from ..workspace import LocalWorkspace
    from .config.schema import ModelProfile, SearchConfig, WebConfig
    from .store import ChatIndex

__all__ = [
    "DEFAULT_AGENT_NAME",
    "DEFAULT_INSTRUCTIONS_FILE",
    "DEFAULT_MEMORY_DIR",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_RETRIES",
    "DEFAULT_WORKSPACE_MODE",
    "GENERIC_INSTRUCTIONS",
    "build_default_agent",
    "resolve_aux_model",
    "resolve_followups",
    "resolve_instructions",
    "resolve_max_retries",
    "resolve_max_runs",
    "resolve_max_tokens",
    "resolve_max_turns",
    "resolve_memory",
    "resolve_provider_timeout",
    "resolve_run_queue",
    "resolve_tools",
    "resolve_vision_tool",
]

DEFAULT_AGENT_NAME = "lovia"
"""The name the default agent is served under (kept across model switches)."""

DEFAULT_MAX_TURNS = 50
DEFAULT_MAX_RUNS = 8
DEFAULT_RETRIES = RetryPolicy().max_attempts - 1
DEFAULT_INSTRUCTIONS_FILE = "AGENTS.md"
GENERIC_INSTRUCTIONS = (
    "You are a helpful assistant running in the lovia web UI. Be concise and accurate; "
    "answer in Markdown when formatting helps."
)
_MAX_INSTRUCTIONS_BYTES = 256 * 1024

DEFAULT_MEMORY_DIR = "./.lovia/memory"
"""Where the default agent's Memory lives unless ``--memory-dir`` / ``LOVIA_MEMORY_DIR`` says otherwise."""

TAVILY_BASE_URL_ENV = "LOVIA_TAVILY_BASE_URL"
"""Points the Tavily backend at another endpoint speaking its API (a proxy, or a local test server)."""

logger = logging.getLogger("lovia.web")


def _number(flag: str, env: str, cli: object, *, kind: type, minimum: float, example: str) -> Any:
    """``cli`` (a flag's text or value), else ``$env``; ``None`` when neither is set."""
    source, raw = (flag, cli) if cli is not None else (env, os.environ.get(env))
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        value = kind(str(raw).strip()) if isinstance(raw, str) else kind(raw)
    except ValueError:
        shown = f"{source} {raw!r}" if source.startswith("--") else f"{source}={raw!r}"
        raise UserError(f"{shown} is not a {'whole ' if kind is int else ''}number", hint=f"e.g. {example}") from None
    if value < minimum:
        shown = f"{source} {raw}" if source.startswith("--") else f"{source}={raw}"
        raise UserError(f"{shown} must be at least {minimum:g}", hint=f"e.g. {example}")
    return value


def resolve_max_retries(cli: int | str | None) -> int:
    """Retries after a failed model call: ``--max-retries``, else ``LOVIA_MAX_RETRIES``, else 4."""
    value = _number("--max-retries", "LOVIA_MAX_RETRIES", cli, kind=int, minimum=0, example="--max-retries 4")
    return DEFAULT_RETRIES if value is None else int(value)


def resolve_max_turns(cli: int | str | None) -> int:
    """The turn limit per run: ``--max-turns``, else ``LOVIA_MAX_TURNS``, else 50."""
    value = _number("--max-turns", "LOVIA_MAX_TURNS", cli, kind=int, minimum=1, example="--max-turns 50")
    return DEFAULT_MAX_TURNS if value is None else int(value)


def resolve_max_runs(cli: int | str | None) -> int:
    """Runs live at once: ``--max-runs``, else ``LOVIA_MAX_RUNS``, else 8."""
    value = _number("--max-runs", "LOVIA_MAX_RUNS", cli, kind=int, minimum=1, example="--max-runs 8")
    return DEFAULT_MAX_RUNS if value is None else int(value)


def resolve_run_queue(cli: int | str | None) -> int | None:
    """Chats that may wait for a free slot: ``--run-queue``, else ``LOVIA_RUN_QUEUE``, else ``None``
    (the server's default, four per live run; ``0``: none wait)."""
    value = _number("--run-queue", "LOVIA_RUN_QUEUE", cli, kind=int, minimum=0, example="--run-queue 32")
    return None if value is None else int(value)


def resolve_max_tokens(cli: int | str | None) -> int | None:
    """The output limit per model call: ``--max-tokens``, else ``LOVIA_MAX_TOKENS``, else the provider's."""
    value = _number("--max-tokens", "LOVIA_MAX_TOKENS", cli, kind=int, minimum=1, example="--max-tokens 8192")
    return None if value is None else int(value)


def resolve_provider_timeout(cli: float | str | None) -> float | None:
    """Seconds a model request may take: ``--provider-timeout``, else ``LOVIA_PROVIDER_TIMEOUT``,
    else ``None`` (the provider's default, 300 s)."""
    value = _number(
        "--provider-timeout", "LOVIA_PROVIDER_TIMEOUT", cli, kind=float, minimum=0.001, example="--provider-timeout 300"
    )
    return None if value is None else float(value)


def resolve_instructions(cli_text: str | None, cli_file: str | None) -> str:
    """The default agent's instructions.

    ``--instructions TEXT`` replaces the built-in instructions. Otherwise the built-in ones come
    first and the project's file follows: ``--instructions-file``, else ``LOVIA_INSTRUCTIONS_FILE``,
    else ``AGENTS.md`` when the current folder has one.

    Raises:
        UserError: Both flags were given, the text is blank, or the file is missing or unreadable.
    """
    if cli_text is not None and cli_file is not None:
        raise UserError(
            "--instructions and --instructions-file cannot be combined", hint="pass the text or the file, not both"
        )
    if cli_text is not None:
        if not cli_text.strip():
            raise UserError("--instructions is empty", hint='e.g. --instructions "Answer in French."')
        return cli_text.strip()
    explicit = cli_file or os.environ.get("LOVIA_INSTRUCTIONS_FILE") or None
    path = Path(explicit).expanduser() if explicit else Path(DEFAULT_INSTRUCTIONS_FILE)
    if not explicit and not path.is_file():
        return GENERIC_INSTRUCTIONS
    flag = "--instructions-file" if cli_file else "LOVIA_INSTRUCTIONS_FILE" if explicit else DEFAULT_INSTRUCTIONS_FILE
    try:
        if path.stat().st_size > _MAX_INSTRUCTIONS_BYTES:
            raise UserError(
                f"{flag} {str(path)!r} is larger than {_MAX_INSTRUCTIONS_BYTES // 1024} KiB",
                hint="keep the instructions short; put reference material in skills",
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{flag} {str(path)!r} does not exist", hint="pass an existing Markdown file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {flag} {str(path)!r}: {exc}", hint="pass a UTF-8 text file") from None
    return f"{GENERIC_INSTRUCTIONS}\n\n{text.strip()}" if text.strip() else GENERIC_INSTRUCTIONS


def resolve_followups(cli_off: bool) -> bool:
    """Whether ``lovia web`` serves follow-up suggestions: on unless ``--no-followups`` or
    ``LOVIA_FOLLOWUPS`` is ``0`` / ``false`` / ``no`` / ``off``."""
    if cli_off:
        return False
    return os.environ.get("LOVIA_FOLLOWUPS", "1").strip().lower() not in ("0", "false", "no", "off")


def resolve_aux_model(profile: ModelProfile | None) -> Provider | None:
    """The provider for auxiliary calls (follow-up suggestions): the ``aux`` profile's, else ``None``
    (the chat model then does that work)."""
    if profile is None:
        return None
    from .config.probe import build_provider
    from .config.schema import Connection

    return build_provider(Connection.from_profile(profile), extra_body=profile.extra_body)


def resolve_memory(cli_dir: str | None, no_memory: bool) -> Memory | None:
    """The default agent's :class:`~lovia.plugins.memory.Memory`: ``None`` with ``--no-memory``,
    else rooted at ``--memory-dir``, else ``LOVIA_MEMORY_DIR``, else :data:`DEFAULT_MEMORY_DIR`."""
    if no_memory:
        return None
    from ..plugins.memory import Memory

    root = (cli_dir or "").strip() or os.environ.get("LOVIA_MEMORY_DIR", "").strip() or DEFAULT_MEMORY_DIR
    return Memory(root=os.path.expanduser(root))


def _search_tool(search: SearchConfig | None) -> Tool[Any] | None:
    from ..tools.search import DuckDuckGoSearch, TavilySearch, web_search

    backend = search.backend if search is not None else "auto"
    if backend == "off":
        return None
    key = (search.tavily_api_key if search is not None else None) or os.environ.get("TAVILY_API_KEY")
    if backend in ("auto", "tavily") and key:
        base = os.environ.get(TAVILY_BASE_URL_ENV, "").strip() or "https://api.tavily.com"
        return web_search(TavilySearch(api_key=key, base_url=base))
    if backend == "tavily":
        logger.warning("lovia web: search backend 'tavily' has no API key; serving without web search")
        return None
    try:
        return web_search(DuckDuckGoSearch())
    except UserError as exc:  # the optional ddgs package is not installed
        if backend == "duckduckgo":
            logger.warning("lovia web: %s (%s); serving without web search", exc.message, exc.hint)
        return None


def resolve_tools(search: SearchConfig | None = None) -> list[Tool[Any]]:
    """The default agent's built-in tools: the clock, and ``web_search`` when ``search`` allows one.

    ``backend="auto"`` uses Tavily when a key is set (``tavily_api_key`` or ``TAVILY_API_KEY``),
    else DuckDuckGo when its optional package is installed, else no search tool; ``"off"`` never
    adds one. A named backend that cannot work is logged and left out (the server still starts).
    """
    from .demo_model import clock

    tools: list[Tool[Any]] = [clock]
    found = _search_tool(search)
    if found is not None:
        tools.append(found)
    return tools


def resolve_vision_tool(
    provider: Provider | str, workspace: LocalWorkspace | None, profile: ModelProfile | None
) -> Tool[Any] | None:
    """``describe_image`` on the vision ``profile``'s model, when the chat ``provider`` cannot read
    images itself and there is a workspace to read them from; else ``None``."""
    from ..providers.base import supports_vision

    if profile is None or workspace is None or supports_vision(provider):
        return None
    from .config.probe import build_provider
    from .config.schema import Connection
    from .vision import make_describe_image_tool

    vision = build_provider(Connection.from_profile(profile), extra_body=profile.extra_body, supports_vision=True)
    if vision is None:
        logger.warning("lovia web: the vision profile %r cannot be used yet; no describe_image tool", profile.id)
        return None
    return make_describe_image_tool(vision)


def _flag(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


def build_default_agent(
    args: argparse.Namespace,
    store: ChatIndex | None,
    provider: Provider | str,
    question_channel: HumanChannel | None = None,
    *,
    config: WebConfig | None = None,
    name: str = DEFAULT_AGENT_NAME,
) -> Agent[Any]:
    """The agent ``lovia web`` serves on ``provider``: the flags' instructions, output limit and
    retries, the clock tool, the skill directories of ``config``, background subagents (unless
    ``--no-subagents``), and the workspace flags.

    ``store`` and ``question_channel`` are accepted for the documented signature; the chat store
    and the ``ask_human`` channel are wired by the app, not the agent.
    """
    del store, question_channel
    from .config.schema import SkillsConfig
    from .config.skills import skill_roots

    plugins: list[Any] = []
    # every listed folder, even a missing one: the plugin rescans, so a folder created later counts
    dirs = [r.resolved for r in skill_roots(config.skills if config is not None else SkillsConfig())]
    if dirs:
        from ..plugins.skills import Skills

        plugins.append(Skills(*dirs))
    if not _flag(args, "no_subagents", False):
        from ..plugins.subagents import Subagents

        plugins.append(Subagents())  # children: this agent without plugins, so they cannot spawn
    agent: Agent[Any] = Agent(
        name=name,
        instructions=resolve_instructions(_flag(args, "instructions"), _flag(args, "instructions_file")),
        model=provider,
        tools=resolve_tools(config.search if config is not None else None),
        settings=ModelSettings(max_tokens=resolve_max_tokens(_flag(args, "max_tokens"))),
        retry=RetryPolicy(max_attempts=resolve_max_retries(_flag(args, "max_retries")) + 1),
        plugins=plugins,
    )
    workspace = resolve_workspace(
        _flag(args, "workspace"), _flag(args, "workspace_mode"), bool(_flag(args, "no_workspace", False))
    )
    describe = resolve_vision_tool(provider, workspace, config.vision_profile() if config is not None else None)
    if describe is not None:
        agent = agent.clone(tools=[*agent.tools, describe])
    return with_workspace(agent, workspace)
