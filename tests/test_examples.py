"""Every example in examples/ runs offline and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_crash_and_resume_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "crash_and_resume.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = proc.stdout
    assert "killed (SIGKILL) mid-tool" in out
    assert out.count("measuring a") == 1, "the stored result of measure(a) was not re-run"
    assert out.count("measuring b") == 2, "the dangling call ran again"
    assert "finished: 'Total: 42.'" in out
    assert "replayed from the checkpoint: 'Total: 42.' (model calls in this process: 0)" in out
    assert "status=completed" in out and "session: 1 run(s)" in out


def test_rate_limited_example_waits_as_retry_after_says():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rate_limited.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == "retrying in 2 s (429) · attempt 2 of 3"
    assert lines[1].startswith("answer: 'Thanks for waiting.' after 2 s")


def test_session_integrity_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "session_integrity.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = proc.stdout
    assert "30 runs, 120 entries" in out
    assert "a new store reads the same history: True" in out
    assert "damaged on disk: session 'u1', run named: True" in out
    assert "hint: restore the file from a backup, or rewind or clear the session" in out


def test_hostile_input_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "hostile_input.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = proc.stdout
    assert "1. status=completed answer='done \ufffd' tool result='you said x\ufffdy'" in out
    assert "2. caught LoviaKeyError (a KeyError too: True), status=failed" in out and "hint: " in out
    assert "3. surrogates: completed" in out and "3. buggy: DAMAGED" in out and "(hint:" in out


def _run_example(name: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout


def test_workspace_agent_example():
    out = _run_example("workspace_agent.py")
    assert "'cat .env' is denied by the workspace policy" in out and "do-not-show" not in out
    assert "the call to 'shell' was not approved" in out
    assert "tests passed" in out and "app.py now: return sum(prices)" in out
    assert "started background process bg-1" in out


def test_builtin_tools_example():
    out = _run_example("builtin_tools.py")
    assert "--- BEGIN EXTERNAL CONTENT (reference material) ---" in out and "# v2" in out
    assert "refused to fetch 'http://127.0.0.1:" in out
    assert "[ask_human] yes" in out and "answer: Summary published." in out


def test_provider_failover_example():
    out = _run_example("provider_failover.py")
    assert "primary calls: 3, then failed over: openai-chat:big-model -> gemini:gemini-2.5-flash" in out
    assert "answer: 'Hello from the secondary.'" in out
    assert "primary calls still 3" in out


def test_mcp_tools_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_tools.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = proc.stdout
    assert "tools offered: units__convert, units__order_map" in out
    assert "tool result: 42.195 km = 26.22 mi" in out
    assert "order_map' was not approved. (error)" in out
    assert "answer: A marathon is about 26.2 miles." in out


def test_todo_list_example():
    out = _run_example("todo_list.py")
    run1, run2 = out.split("reminder in the first view of run 2:")
    assert "[x] Outline the talk\n[~] Write the slides\n[ ] Rehearse" in run1
    assert "[x] Outline the talk\n[~] Write the slides\n[ ] Rehearse" in run2
    assert "rebuilt from the session: ['Outline the talk=completed', 'Write the slides=in_progress'" in out


def test_skills_catalog_example():
    out = _run_example("skills_catalog.py")
    assert "  - `refund-policy` — Use when a customer asks for a refund" in out
    assert "tool result: BEGIN SKILL REFERENCE MATERIAL (skill: refund-policy) ..." in out
    assert "file: references/tiers.md) ..." in out
    assert "leaves the skill's directory" in out


def test_memory_notes_example():
    out = _run_example("memory_notes.py")
    assert "MEMORY.md after run 1: - [" in out and "] Is vegetarian" in out
    assert "notes in run 2's prompt: ['- [" in out
    assert "recall: Earlier the user planned a vegetarian dinner party." in out


def test_subagents_background_example():
    out = _run_example("subagents_background.py")
    assert "spawn_subagent: Started subagent t1 " in out and "spawn_subagent: Started subagent t2 " in out
    assert "report: Findings on 'solar panels'" in out
    assert "report: Findings on 'heat pumps' (also: compare running costs)" in out
    assert "answer: Both reports are in" in out


@pytest.mark.skipif(not Path("/usr/bin/redis-server").exists(), reason="redis-server is not installed")
def test_celery_worker_crash_example():
    pytest.importorskip("celery")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "celery_worker_crash.py")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "SIGKILL the worker's pool process" in out
    for n in (1, 2, 3):
        line = next(line for line in out.splitlines() if line.startswith(f"order-{n}:"))
        assert f"'Order {n} is on its way.'" in line and "shipped 1x, session: 1 run(s)" in line, line
    first = next(line for line in out.splitlines() if line.startswith("order-1:"))
    assert "ship() ran 2x" in first, first  # the call in flight ran again; its effect did not


def test_web_schedules_example():
    out = _run_example("web_schedules.py")
    assert "fires: 4 for 4 claimed slots, distinct: 4" in out
    assert "fire_count=4 next_fire=+540s" in out


def test_web_attachments_example():
    pytest.importorskip("fastapi")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "web_attachments.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "refused: 415 unsupported_file_type" in proc.stdout
    assert "I got 1 image(s) and the files ['notes.md']." in proc.stdout
    assert "branch: 2 entries, origin fork" in proc.stdout


def test_web_charts_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "web_charts.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == 'show_chart: the model sees {"lovia_ui": {"kind": "chart", "from_args": "option"}}'
    assert lines[1].startswith('top_products: the model sees {"lovia_ui": {"kind": "table", "props": {')
    assert lines[2] == "swatch: the model sees [1 attachment(s)]"


def test_web_api_router_example():
    out = _run_example("web_api_router.py")
    assert "stream events: session, snapshot, turn_started, text_delta, message_completed, refs, timing, done" in out
    assert "answer: Hello from the mounted API." in out
    assert "chats: ['hi']" in out
    assert "unknown chat: 404 session_not_found" in out and "no token: 401 server_token" in out
    assert "host route: {'app': 'mine'}" in out


def test_web_branding_example():
    pytest.importorskip("fastapi")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "web_branding.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[:4] == ["logo: True", "theme: True", "own nav link: True", "script listed: True"]
    assert "GET /ui/acme.js: 200" in lines
    assert "GET /ui/index.html: 404 (templates stay private)" in lines
    assert "GET /ui/../web_branding.py: 404" in lines


def test_web_approvals_example_decides_equal_call_ids_per_chat():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "web_approvals.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = proc.stdout
    assert "pending: {'chat_billing': ['call_1'], 'chat_search': ['call_1']}" in out
    assert out.count("(restarting") == 1 and "(restarting billing)" in out
    assert "chat_billing: tool result 'billing restarted'" in out
    assert "chat_search: tool result \"Tool error: the call to 'restart_service' was not approved.\"" in out
    assert "still pending: []" in out


def test_run_usage_example():
    out = _run_example("run_usage.py")
    assert "model calls: 2, input tokens in all: 2460" in out
    assert "last prompt: 1260 tokens = 1.0% of a 128,000-token window" in out
    assert "replayed: True, last prompt still 1260 tokens" in out
