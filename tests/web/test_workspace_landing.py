"""The Files panel judges a path where it lands: dotfiles behind visible links, hard links, swaps."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.workspace import Workspace

from .helpers import ThreadServer

DOTENV = "OPENAI_API_KEY=sk-dotenv-4417"
CREDENTIAL = "https://bob:ghp_tokenvalue9931@git.example.invalid/repo.git"
OUTSIDE = "outside secret 7c21"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {CREDENTIAL}\n')
    (root / ".env").write_text(DOTENV + "\n")
    (root / "README.md").write_text("# visible\n")
    (tmp_path / "outside.txt").write_text(OUTSIDE + "\n")
    os.symlink(".env", root / "env_view.txt")
    os.symlink(".git", root / "gitdir")
    os.symlink(".git/config", root / "git_config.txt")
    os.link(tmp_path / "outside.txt", root / "notes.txt")
    return root


@pytest.fixture
def srv(tmp_path: Path, root: Path) -> Iterator[ThreadServer]:
    model = ScriptedProvider(lambda _entries, _tools: text("ok"))
    agents: dict[str, Agent[Any]] = {"coder": Agent(name="coder", model=model, workspace=Workspace.local(str(root)))}
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "web.db"))) as s:
        yield s


def _get(srv: ThreadServer, route: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{srv.url}/api/workspace{route}", params=params, timeout=30)


def _leaks(body: bytes) -> bool:
    return any(s.encode() in body for s in (DOTENV, "ghp_tokenvalue9931", OUTSIDE))


@pytest.mark.parametrize("path", ["env_view.txt", "git_config.txt", "gitdir/config", "gitdir", "notes.txt"])
def test_visible_names_leading_to_dotfiles_or_hard_links_are_refused(srv: ThreadServer, path: str) -> None:
    for route in ("/file", "/raw", "/files"):
        got = _get(srv, route, path=path)
        assert got.status_code == 403, (route, path, got.text)
        detail = got.json()["detail"]
        assert detail["code"] == "path_denied" and detail["hint"]
        assert not _leaks(got.content)


def test_the_listing_leaves_out_links_into_dotfiles(srv: ThreadServer) -> None:
    names = [e["name"] for e in _get(srv, "/files").json()]
    assert "env_view.txt" not in names and "gitdir" not in names and "git_config.txt" not in names
    assert "README.md" in names


def test_240_reads_racing_a_hard_link_swap_never_serve_the_outside_file(
    srv: ThreadServer, root: Path, tmp_path: Path
) -> None:
    (root / "page.txt").write_text("inside page\n")
    swapper = subprocess.Popen(
        [
            "sh",
            "-c",
            f'while :; do ln -f "{tmp_path}/outside.txt" page.tmp && mv -fT page.tmp page.txt; '
            "echo 'inside page' > page.new && mv -fT page.new page.txt; done",
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    leaked = served = 0
    try:
        with httpx.Client(timeout=30) as client:
            for i in range(240):
                route = "/file" if i % 2 else "/raw"
                got = client.get(f"{srv.url}/api/workspace{route}", params={"path": "page.txt"})
                leaked += _leaks(got.content)
                served += got.status_code == 200
    finally:
        swapper.kill()
        swapper.wait()
    assert leaked == 0
    assert served > 0
