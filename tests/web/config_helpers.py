"""Fixtures for the model-settings tests: fake OpenAI-compatible endpoints and a configured app."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

from lovia.web import create_app
from lovia.web.command import add_web_parser
from lovia.web.config import ConfigRuntime, LoadedConfig, WebConfig

from ..providers.servers import FakeServer, RecordedRequest, Reply, openai_text_stream
from .helpers import ThreadServer


def web_args(*flags: str) -> argparse.Namespace:
    """``lovia web`` flags, parsed by the real parser (no workspace unless asked)."""
    parser = argparse.ArgumentParser()
    add_web_parser(parser.add_subparsers(dest="command"))
    extra = () if any(f.startswith(("--workspace", "--readonly", "--trusted")) for f in flags) else ("--no-workspace",)
    return parser.parse_args(["web", *extra, *flags])


class Endpoint:
    """A fake OpenAI-compatible server whose every answer says which endpoint wrote it.

    ``hold`` makes the next completion wait until ``release`` is set (a run in flight).
    """

    def __init__(self, tag: str, models: list[dict[str, Any]] | None = None) -> None:
        self.tag = tag
        self.server = FakeServer()
        self.server.routes["/v1/models"] = Reply.json(200, {"object": "list", "data": models or [{"id": "m"}]})
        self.server.responder = self._answer
        self.hold = False
        self.holding = threading.Event()
        self.release = threading.Event()

    def _answer(self, request: RecordedRequest) -> Reply:
        if self.hold:
            self.hold = False
            self.holding.set()
            self.release.wait(30)
        return Reply.sse(openai_text_stream(f"answer from {self.tag}"))

    @property
    def url(self) -> str:
        return self.server.base_url

    def posts(self) -> list[RecordedRequest]:
        return self.server.posts()

    def __enter__(self) -> Endpoint:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.stop()


def profile(pid: str, endpoint: Endpoint | str, *, key: str | None = None, model: str = "m") -> dict[str, Any]:
    """A profile document pointing at ``endpoint``."""
    url = endpoint.url if isinstance(endpoint, Endpoint) else endpoint
    return {"id": pid, "name": pid.upper(), "model": model, "base_url": url, "api_key": key}


def make_runtime(tmp: Path, config: dict[str, Any] | None = None, *flags: str) -> ConfigRuntime:
    """A runtime over ``tmp/config.json`` holding ``config`` (not written until a change)."""
    doc = WebConfig.model_validate(config or {})
    loaded = LoadedConfig(doc, tmp / "config.json", "test config", False)
    return ConfigRuntime(args=web_args(*flags), loaded=loaded, store=None)


def config_server(tmp: Path, runtime: ConfigRuntime, **kwargs: Any) -> ThreadServer:
    """The app serving the runtime's default agent, on a loopback port."""
    app = create_app({runtime.agent_key: runtime.agent}, db_path=str(tmp / "web.db"), config_runtime=runtime, **kwargs)
    return ThreadServer(app)
