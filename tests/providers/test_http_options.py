"""Per-provider networking options (``proxy=``, ``verify=``) for all four adapters."""

from __future__ import annotations

import ssl

import pytest

from lovia.exceptions import UserError
from lovia.providers import AnthropicProvider, GeminiProvider, OpenAIChatProvider, OpenAIResponsesProvider
from lovia.transcript import InputEntry

from .conftest import collect, track
from .sdk_wire import ResponsesStream, gemini_text_stream
from .servers import FakeServer, Reply, anthropic_stream, anthropic_text_stream, openai_text_stream

HI = [InputEntry(role="user", content="hi")]
UPSTREAM = "http://upstream.invalid"


@pytest.mark.parametrize(
    ("make", "reply", "path"),
    [
        (
            lambda proxy: OpenAIChatProvider("m", base_url=f"{UPSTREAM}/v1", proxy=proxy),
            lambda: openai_text_stream("ok"),
            "/v1/chat/completions",
        ),
        (
            lambda proxy: OpenAIResponsesProvider("m", base_url=f"{UPSTREAM}/v1", proxy=proxy),
            lambda: ResponsesStream().created().message("ok").completed().body(),
            "/v1/responses",
        ),
        (
            lambda proxy: AnthropicProvider("m", base_url=f"{UPSTREAM}/v1", proxy=proxy),
            lambda: anthropic_stream(anthropic_text_stream("ok")),
            "/v1/messages",
        ),
        (
            lambda proxy: GeminiProvider("m", base_url=UPSTREAM, proxy=proxy),
            lambda: gemini_text_stream("ok"),
            "/v1beta/models/m:streamGenerateContent?alt=sse",
        ),
    ],
)
async def test_an_explicit_proxy_carries_the_request(server: FakeServer, make, reply, path: str) -> None:
    """The local server plays the proxy: it receives the absolute URL of the real endpoint."""
    server.enqueue(Reply.sse(reply()))
    provider = track(make(f"http://127.0.0.1:{server.port}"))
    await collect(provider.stream(HI))
    assert server.posts()[0].path == UPSTREAM + path


def test_verify_takes_a_context_a_flag_or_a_bundle_path(tmp_path) -> None:
    context = ssl.create_default_context()
    for verify in (context, False, True):
        track(OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1", verify=verify))
    with pytest.raises(UserError, match="no such CA bundle"):
        OpenAIResponsesProvider("m", base_url="http://127.0.0.1:9/v1", verify=str(tmp_path / "missing.pem"))


def test_extra_body_must_be_a_mapping() -> None:
    with pytest.raises(UserError, match="extra_body"):
        GeminiProvider("m", base_url="http://127.0.0.1:9", extra_body=["not", "a", "dict"])  # type: ignore[arg-type]
