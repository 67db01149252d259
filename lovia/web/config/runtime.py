"""The served default agent, rebuilt from ``config.json`` and swapped in while the server runs.

A switch never touches a run in flight: a run holds the agent (and so the provider) it started
with, and only the *next* start looks the agent up again. The provider a switch replaces is
closed once no live run uses it any more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ...agent import Agent
from ...context import Compaction
from ...exceptions import UserError
from ...providers import model_from_env
from ...providers.base import Provider, provider_label
from ...tools.human import HumanChannel
from ..builder import DEFAULT_AGENT_NAME, build_default_agent, resolve_provider_timeout
from ..demo_model import DemoModel, demo_agent
from .probe import build_provider
from .schema import Connection, ModelProfile, Roles, WebConfig
from .storage import LoadedConfig, save_config

if TYPE_CHECKING:
    from ..api.deps import RouterDeps
    from ..store import ChatIndex

__all__ = ["Built", "ConfigRuntime"]

Built = tuple[Agent[Any], "Provider | str", Compaction, "Provider | None"]
"""What :meth:`ConfigRuntime.build` makes: the agent, its model (a ``LOVIA_MODEL`` string stays a
string, which the run turns into a provider of its own), its compaction, the aux provider."""

logger = logging.getLogger("lovia.web")


class ConfigRuntime:
    """Owns the web app's model configuration and the default agent built from it.

    Args:
        args: the ``lovia web`` flags (instructions, output limit, retries, timeout, workspace).
        loaded: the active configuration and the file it is saved to.
        store: the chat store (passed on to the agent builder).
        question_channel: the ``ask_human`` channel, if the app has one.
        agent_key: the name the default agent is served under (default ``lovia``); it stays
            the same across switches, so chats and schedules keep pointing at it.
    """

    def __init__(
        self,
        *,
        args: argparse.Namespace,
        loaded: LoadedConfig,
        store: ChatIndex | None,
        question_channel: HumanChannel | None = None,
        agent_key: str | None = None,
    ) -> None:
        self._args = args
        self._loaded = loaded
        self._config = loaded.config
        self._store = store
        self._question_channel = question_channel
        self.agent_key = agent_key or DEFAULT_AGENT_NAME
        self._deps: RouterDeps | None = None
        self._lock = asyncio.Lock()
        self._retired: list[Provider | str] = []
        self._current: Built | None = None

    # ------------------------------------------------------------------ state

    @property
    def config(self) -> WebConfig:
        """The configuration in force."""
        return self._config

    @property
    def loaded(self) -> LoadedConfig:
        """Where the configuration lives (its path and scope label)."""
        return self._loaded

    def bind(self, deps: RouterDeps) -> None:
        """Serve through ``deps``: its agents get swapped on :meth:`apply`."""
        self._deps = deps
        deps.demo = not self.configured
        aux = self.current[3]
        if aux is not None:
            deps.followup_model = aux

    def serveable(self, config: WebConfig) -> list[str]:
        """The ids of the profiles in ``config`` that are complete enough to call."""
        return [m.id for m in config.models if not Connection.from_profile(m).missing()]

    @property
    def configured(self) -> bool:
        """Whether a real model answers (a usable chat profile, or ``LOVIA_MODEL`` without one),
        not the offline demo."""
        return not isinstance(self.current[0].model, DemoModel)

    @property
    def model_from_outside(self) -> dict[str, str] | None:
        """``{"model", "source"}`` when the default agent's model comes from ``--model`` or
        ``LOVIA_MODEL`` rather than a saved profile (Settings shows it); else ``None``."""
        flag = getattr(self._args, "model", None)
        if flag:
            return {"model": str(flag), "source": "--model"}
        if self._config.default_profile() is not None:
            return None
        spec = model_from_env(required=False)
        return {"model": str(spec), "source": "LOVIA_MODEL"} if spec else None

    @property
    def agent(self) -> Agent[Any]:
        """The default agent as currently built."""
        return self.current[0]

    @property
    def current(self) -> Built:
        """What :meth:`build` made for the configuration in force (built on first use)."""
        if self._current is None:
            try:
                self._current = self.build()
            except UserError as exc:  # a half-finished profile must not keep the server from starting
                logger.warning("lovia web: %s (%s); serving the offline demo until it is fixed", exc.message, exc.hint)
                self._current = self.build(self._config.model_copy(update={"models": [], "roles": Roles()}))
        return self._current

    # ------------------------------------------------------------------ building

    def _provider(self, profile: ModelProfile) -> Provider | None:
        return build_provider(
            Connection.from_profile(profile),
            timeout=resolve_provider_timeout(getattr(self._args, "provider_timeout", None)),
            trust_env=True if getattr(self._args, "trust_env", False) else None,
            extra_body=profile.extra_body,
            supports_vision=profile.vision_override(),
        )

    def build(self, config: WebConfig | None = None) -> Built:
        """``(agent, provider, compaction, aux provider)`` for ``config`` (default: the one in force).

        ``lovia web --model`` when given; else the chat profile when it is usable; else
        ``LOVIA_MODEL``; else the offline demo model.

        Raises:
            UserError: The chat profile cannot be called yet (a key is missing), or a flag is wrong.
        """
        config = config or self._config
        flag = getattr(self._args, "model", None)
        profile = None if flag else config.default_profile()
        provider: Provider | str | None = None
        if profile is not None:
            provider = self._provider(profile)
            if provider is None:
                gaps = ", ".join(Connection.from_profile(profile).missing())
                raise UserError(
                    f"model profile {profile.id!r} cannot be used yet (missing: {gaps})",
                    hint="add the API key in Settings → Models, or point it at another endpoint",
                )
        else:
            spec = flag or model_from_env(required=False)
            if spec:
                provider = spec
        aux_profile = config.aux_profile()
        aux = self._provider(aux_profile) if aux_profile is not None else None
        if provider is None:
            agent = demo_agent().clone(name=self.agent_key)
            model = agent.model
            assert isinstance(model, Provider)
            return agent, model, _compaction(agent), aux
        agent = build_default_agent(
            self._args, self._store, provider, self._question_channel, config=config, name=self.agent_key
        )
        return agent, provider, _compaction(agent), aux

    # ------------------------------------------------------------------ switching

    async def apply(self, config: WebConfig, *, persist: bool = True) -> None:
        """Make ``config`` the one in force: build its agent, save it (``persist``), swap it in.

        The build comes first, so a configuration that cannot be served is neither saved nor
        applied. Runs in flight keep their agent; the next message uses the new one.
        """
        async with self._lock:
            built = self.build(config)
            if persist:
                await asyncio.to_thread(save_config, config, self._loaded.path)
                self._loaded = LoadedConfig(config, self._loaded.path, self._loaded.label, True)
            previous = self._current
            self._config, self._current = config, built
            deps = self._deps
            if deps is None:
                return
            deps.agents[self.agent_key] = built[0]  # the supervisor reads the same dict
            from ..subagents import rewire_subagents

            rewire_subagents(deps)  # the new agent's Subagents plugin runs its children as chats too
            deps.demo = not self.configured
            deps.followup_model = built[3]
            if previous is not None:
                self._retired.extend(p for p in (previous[1], previous[3]) if p is not None)
            await self._close_retired()
            profile = config.default_profile()
            deps.emit(
                "config_changed",
                {
                    "configured": self.configured,
                    "model": _model_label(built[0]),
                    "profile_id": profile.id if profile is not None else None,
                    "name": profile.display_name if profile is not None else None,
                },
            )

    async def _close_retired(self) -> None:
        """Close the replaced providers no live run (and no served agent) still uses."""
        deps = self._deps
        if deps is None:
            return
        in_use = {id(r.agent.model) for r in deps.supervisor.live_runs}
        in_use.update(id(a.model) for a in deps.supervisor.agents.values())
        if self._current is not None and self._current[3] is not None:
            in_use.add(id(self._current[3]))
        keep: list[Provider | str] = []
        for provider in self._retired:
            if id(provider) in in_use:
                keep.append(provider)
                continue
            close = getattr(provider, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    await close()
        self._retired = keep

    async def aclose(self) -> None:
        """Close every provider this runtime built that is no longer served."""
        await self._close_retired()


def _compaction(agent: Agent[Any]) -> Compaction:
    policy = agent.context_policy
    return policy if isinstance(policy, Compaction) else Compaction()


def _model_label(agent: Agent[Any]) -> str | None:
    model = agent.model
    return model if model is None or isinstance(model, str) else provider_label(model)
