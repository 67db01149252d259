"""A real workspace tree with an outside directory, denied files, links and special files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lovia.workspace import LocalWorkspaceSession, WorkspaceLimits, WorkspacePolicy

SECRET = "TOPSECRET-7f3a"
DOTENV = "API_KEY=hunter2-9b1c"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.txt").write_text("line one\nline two\nline three\n")
    (root / ".env").write_text(DOTENV + "\n")
    (root / ".env.local").write_text(DOTENV + "\n")
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_text("inner TODO\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "key.pem").write_text(SECRET + "\n")
    os.symlink(outside / "secret.txt", root / "link_out")
    os.symlink(outside, root / "dir_out")
    os.symlink(root / ".env", root / "link_env")
    os.symlink("/dev/zero", root / "dev_zero")
    os.link(outside / "secret.txt", root / "hard_out")
    os.mkfifo(root / "fifo")
    os.symlink("../outside/secret.txt", root / "rel_out")  # relative link climbing out
    os.symlink("dir_out", root / "chain")  # inside -> inside -> outside
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("..", root / "sub" / "up")  # sub/up/.. is the root's parent
    (root / "bin.dat").write_bytes(b"\x00\x01\x02binary" * 10)
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (root / "big.txt").write_text("x" * 5000)
    return root


@pytest.fixture
def policy() -> WorkspacePolicy:
    """Reads outside the root denied, writes inside allowed, dotenv files and secrets/ denied."""
    return WorkspacePolicy(denied_paths=(".env*", "secrets/**"), shell_default="allow")


@pytest.fixture
async def session(tree: Path, policy: WorkspacePolicy):
    ws = LocalWorkspaceSession(
        root=tree, policy=policy, limits=WorkspaceLimits(max_file_read_bytes=4000), shell_timeout=20
    )
    yield ws
    await ws.close()
