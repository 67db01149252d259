"""`lovia web --check`: the real CLI in a subprocess against a real local OpenAI-compatible server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.providers.servers import FakeServer, Reply, openai_text_stream

_OWN_PREFIXES = ("LOVIA_", "OPENAI_", "ANTHROPIC_")


def check(cwd: Path, *args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `lovia web --check ARGS` with only ``env`` as its LOVIA_/OPENAI_/ANTHROPIC_ variables."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES)}
    full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.cli", "web", "--check", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout + proc.stderr


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ok_names_model_url_and_probe_result(tmp_path: Path) -> None:
    with FakeServer() as fake:
        fake.enqueue(Reply.sse(openai_text_stream("OK")))
        env = {"LOVIA_MODEL": "openai:test-model", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-secret-123"}
        code, out = check(tmp_path, env=env)
        posts = fake.posts()
    assert code == 0, out
    line = out.strip()
    assert "openai:test-model" in line and fake.base_url in line
    assert "OK in " in line and " ms" in line and "'OK'" in line
    assert "API key set" in line and "sk-secret-123" not in out
    assert len(posts) == 1
    body = posts[0].json
    assert body["model"] == "test-model" and body["max_tokens"] == 8
    assert body["messages"] == [{"role": "user", "content": "Reply with OK."}]


def test_unauthorized_prints_vendor_message_and_hint(tmp_path: Path) -> None:
    with FakeServer() as fake:
        error = {
            "message": "Invalid token for this gateway",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
        fake.enqueue(Reply.json(401, {"error": error}))
        code, out = check(tmp_path, env={"LOVIA_MODEL": "openai:test-model", "OPENAI_BASE_URL": fake.base_url})
    assert code == 1, out
    assert "FAILED" in out and "HTTP 401" in out and "Invalid token for this gateway" in out
    assert "hint: check OPENAI_API_KEY" in out
    assert "no API key" in out


def test_server_error_is_tried_once(tmp_path: Path) -> None:
    with FakeServer() as fake:
        fake.responder = lambda _request: Reply.json(503, {"error": {"message": "overloaded, try later"}})
        started = time.monotonic()
        code, out = check(tmp_path, env={"LOVIA_MODEL": "openai:test-model", "OPENAI_BASE_URL": fake.base_url})
        posts = fake.posts()
    assert code == 1, out
    assert "overloaded, try later" in out and "hint:" in out
    assert len(posts) == 1  # no retries: a 503 is retryable in a run, not in the probe
    assert time.monotonic() - started < 15


def test_no_model_explains_configuration(tmp_path: Path) -> None:
    code, out = check(tmp_path, env={})
    assert code == 1, out
    assert "no model configured" in out and "offline demo" in out
    for name in ("LOVIA_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert name in out


def test_dead_endpoint_fails_fast_with_connection_error(tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    env = {"LOVIA_MODEL": "openai:test-model", "OPENAI_BASE_URL": base_url, "LOVIA_PROVIDER_TIMEOUT": "5"}
    started = time.monotonic()
    code, out = check(tmp_path, env=env)
    assert code == 1, out
    assert "connection failed" in out and base_url in out and "hint:" in out
    assert time.monotonic() - started < 15


def test_app_flag_checks_every_served_agent(tmp_path: Path) -> None:
    (tmp_path / "checkapp.py").write_text(
        "from lovia import Agent\n"
        "agents = {\n"
        "    'writer': Agent(name='writer', model='openai:model-a'),\n"
        "    'coder': Agent(name='coder', model='openai:model-b'),\n"
        "}\n"
    )
    with FakeServer() as fake:
        fake.enqueue(Reply.sse(openai_text_stream("OK")), Reply.sse(openai_text_stream("OK.")))
        env = {"LOVIA_MODEL": "openai:ignored", "OPENAI_BASE_URL": fake.base_url}
        code, out = check(tmp_path, "--app", "checkapp:agents", env=env)
        models = [p.json["model"] for p in fake.posts()]
    assert code == 0, out
    lines = out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("writer: openai:model-a") and lines[1].startswith("coder: openai:model-b")
    assert models == ["model-a", "model-b"]


def test_check_module_does_not_import_the_web_stack() -> None:
    code = (
        "import sys, lovia.web.check; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"


async def test_probe_gives_up_after_its_total_timeout() -> None:
    from lovia.exceptions import ProviderError
    from lovia.providers import OpenAIChatProvider
    from lovia.web.check import probe
    from tests.providers.servers import split_every

    body = openai_text_stream("OK, but very slowly")
    with FakeServer() as fake:
        fake.enqueue(Reply.sse(body, pieces=split_every(body, 8), delay=0.2))  # bytes keep coming: no read timeout
        provider = OpenAIChatProvider("test-model", base_url=fake.base_url, api_key="")
        started = time.monotonic()
        try:
            await probe(provider, timeout=0.5)
        except ProviderError as exc:
            assert "no complete answer within 0.5 s" in exc.message and exc.hint
        else:
            raise AssertionError("the probe should have timed out")
        finally:
            await provider.aclose()
    assert time.monotonic() - started < 5
