"""web_fetch against an attacker who controls DNS: rebinding, failed lookups, redirects.

Each attack runs in a child process inside a network namespace of our own that has nothing but
loopback; its resolv.conf points at a DNS server the child runs (see fetch_in_netns.py). No
packet leaves the namespace: the "public" address it hands out has no route there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHILD = str(Path(__file__).with_name("fetch_in_netns.py"))
ROOT = str(Path(__file__).resolve().parents[2])


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def netns() -> Iterator[str]:
    if shutil.which("ip") is None:
        pytest.skip("needs the 'ip' command (iproute2) to create a network namespace")
    if os.geteuid() != 0:
        pytest.skip("needs root to create a network namespace (ip netns add)")
    name = f"lovia-fetch-{os.getpid()}"
    conf = Path("/etc/netns") / name
    conf.mkdir(parents=True, exist_ok=True)
    # `ip netns exec` bind-mounts these over /etc/resolv.conf and /etc/nsswitch.conf
    (conf / "resolv.conf").write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
    (conf / "nsswitch.conf").write_text("hosts: files dns\n")
    (conf / "hosts").write_text("127.0.0.1 localhost\n")
    try:
        added = _ip("netns", "add", name)
        if added.returncode != 0:
            pytest.skip(f"cannot create a network namespace here: {added.stderr.strip()}")
        up = _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        assert up.returncode == 0, up.stderr
        yield name
    finally:
        _ip("netns", "del", name)
        shutil.rmtree(conf, ignore_errors=True)


def attack(netns: str, scenario: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, CHILD, scenario],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_name_that_rebinds_to_loopback_after_the_check_is_never_connected_to(netns: str) -> None:
    # First lookup: a public address; every later one: 127.0.0.1. The old reader checked the
    # first answer and let httpx look the name up again, which reached the internal service.
    result = attack(netns, "rebind")
    assert result["hits"] == [], "the internal service was reached"
    assert result["outcome"] == "refused"
    assert result["queries"].count("A rebind.test") == 1  # looked up once


def test_a_name_answering_public_and_loopback_together_is_refused(netns: str) -> None:
    result = attack(netns, "both")
    assert result["hits"] == []
    assert result["outcome"] == "refused" and "127.0.0.1" in str(result["message"])
    assert "non-public" in str(result["message"]) and result["hint"]


def test_a_failed_lookup_is_refused_not_left_to_a_second_lookup(netns: str) -> None:
    # NXDOMAIN to the check, 127.0.0.1 to whoever asks next: the old reader let the request go.
    result = attack(netns, "lookup-fails")
    assert result["hits"] == [], "the internal service was reached"
    assert result["outcome"] == "refused" and "could not be looked up" in str(result["message"])
    assert result["hint"]


def test_a_redirect_to_a_rebinding_name_is_checked_and_pinned_like_the_first_hop(netns: str) -> None:
    result = attack(netns, "redirect")
    assert result["hits"] == ["start.test:8080/hop"], "only the allowed first hop was served"
    assert result["outcome"] == "refused"
    assert result["queries"].count("A rebind.test") == 1
