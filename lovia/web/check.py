"""``lovia web --check``: show the model setup the web app would use and probe each endpoint once.

Nothing is served and FastAPI/uvicorn are never imported, so the check works without ``lovia[web]``.
Each agent's provider is built the way a run builds it, then sent one tiny request ("Reply with
OK.", ``max_tokens=8``). The probe calls the provider directly, so the run loop's
:class:`~lovia.reliability.RetryPolicy` does not apply: it is exactly one attempt, bounded by a
total timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ..agent import Agent
from ..exceptions import LoviaError, ProviderError, UserError
from ..providers import ModelSettings, Provider, provider_from_string
from ..providers.base import provider_label
from ..transcript import InputEntry, TextDelta
from .agents import AgentSet, default_agents, load_app, resolve_agents

__all__ = ["PROBE_PROMPT", "check_agents", "probe", "run_check"]

PROBE_PROMPT = "Reply with OK."
PROBE_MAX_TOKENS = 8
PROBE_TIMEOUT = 30.0
_PREVIEW_CHARS = 24
_UNKNOWN = object()

_NO_MODEL = """\
no model configured: LOVIA_MODEL is not set, so `lovia web` would serve the offline demo model.
Configure one, then run `lovia web --check` again:
  OpenAI:             export LOVIA_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=sk-...
  OpenAI-compatible:  export LOVIA_MODEL=openai:qwen2.5:7b OPENAI_BASE_URL=http://127.0.0.1:11434/v1
                      (vLLM, Ollama, llama.cpp...; OPENAI_API_KEY only if the server wants one)
  Anthropic:          export LOVIA_MODEL=anthropic:claude-sonnet-4-5 ANTHROPIC_API_KEY=sk-ant-...
                      (ANTHROPIC_BASE_URL for a proxy or gateway)
Or serve your own agents with --app module:attr."""

Out = Callable[[str], None]


async def probe(
    provider: Provider, settings: ModelSettings | None = None, *, timeout: float = PROBE_TIMEOUT
) -> tuple[int, str]:
    """Stream one minimal answer; return ``(latency_ms, text)``.

    Args:
        provider: The endpoint to ask.
        settings: The agent's ``ModelSettings`` (``max_tokens`` is forced to 8); ``None`` for defaults.
        timeout: Seconds for the whole request, connection to last byte.

    Raises:
        LoviaError: Whatever the provider raised (``ProviderError``, ``ContextOverflowError``...),
            or a ``ProviderError`` when the answer did not finish within ``timeout``.
    """
    settings = dataclasses.replace(settings or ModelSettings(), max_tokens=PROBE_MAX_TOKENS)
    parts: list[str] = []

    async def consume() -> None:
        async for delta in provider.stream([InputEntry("user", PROBE_PROMPT)], settings=settings):
            if isinstance(delta, TextDelta):
                parts.append(delta.text)

    started = time.monotonic()
    try:
        await asyncio.wait_for(consume(), timeout)
    except asyncio.TimeoutError:
        raise ProviderError(
            f"no complete answer within {timeout:g} s",
            hint="the endpoint accepts connections but does not answer; check the server and the model name",
        ) from None
    return round((time.monotonic() - started) * 1000), "".join(parts)


def _describe(agent: Agent[Any], provider: Provider) -> str:
    model = agent.model if isinstance(agent.model, str) else provider_label(provider)
    base_url = getattr(provider, "base_url", None) or "(no base URL)"
    key = getattr(provider, "_api_key", _UNKNOWN)  # never printed: only whether there is one
    key_state = "API key n/a" if key is _UNKNOWN else "API key set" if key else "no API key"
    return f"{agent.name}: {model} via {provider.name} at {base_url}, {key_state}"


def _fail(out: Out, head: str, exc: LoviaError, fallback_hint: str) -> bool:
    out(f"{head} -- FAILED: {exc.message}")
    out(f"  hint: {exc.hint or fallback_hint}")
    return False


async def _check_agent(agent: Agent[Any], *, timeout: float, out: Out) -> bool:
    model = agent.model
    try:
        if model is None:
            raise UserError(f"agent {agent.name!r} has no model", hint='set Agent(model="openai:gpt-4.1-mini")')
        provider = provider_from_string(model) if isinstance(model, str) else model
    except LoviaError as exc:
        return _fail(out, f"{agent.name}: {model}", exc, "check the model string and its environment variables")
    head = _describe(agent, provider)
    try:
        latency_ms, text = await probe(provider, agent.settings, timeout=timeout)
    except LoviaError as exc:
        where = getattr(provider, "base_url", "the endpoint")
        return _fail(out, head, exc, f"check that {where} is up and serves model {provider.model!r}")
    finally:
        close = getattr(provider, "aclose", None)
        if isinstance(model, str) and callable(close):  # built here from a string: ours to close
            await close()
    preview = " ".join(text.split())
    if len(preview) > _PREVIEW_CHARS:
        preview = preview[:_PREVIEW_CHARS] + "..."
    out(f"{head} -- OK in {latency_ms} ms, replied {preview!r}")
    return True


async def check_agents(agents: AgentSet, *, out: Out = print, timeout: float = PROBE_TIMEOUT) -> int:
    """Print one line per agent (model, base URL, whether a key is set, probe result); return the exit code.

    Returns 0 when every probe succeeded, 1 when one failed or no model is configured (the
    offline demo model is not probed; guidance on configuring a model is printed instead).
    """
    if agents.demo:
        out(_NO_MODEL)
        return 1
    results = [await _check_agent(agent, timeout=timeout, out=out) for agent in agents.agents.values()]
    return 0 if all(results) else 1


def run_check(app: str | None = None, *, out: Out = print) -> int:
    """``lovia web --check [--app module:attr]``: resolve the agents exactly as ``lovia web`` does and check them."""
    agent_set = resolve_agents(load_app(app)) if app else default_agents()
    return asyncio.run(check_agents(agent_set, out=out))
