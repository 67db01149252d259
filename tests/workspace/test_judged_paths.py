"""One resolution shared by the approval check and the operation; hard links judged where they may live."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from lovia.workspace import LocalWorkspaceSession, WorkspacePolicy
from lovia.workspace.errors import PermissionDeniedError, WorkspaceError
from lovia.workspace.tools import path_needs_approval, read_file

SECRET = "OUTSIDE-SECRET-51d2"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("harmless inside text\n")
    return root, outside


async def test_grep_over_a_folder_skips_a_hard_link_to_an_outside_file(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.link(outside / "secret.txt", root / "notes.txt")
    ws = LocalWorkspaceSession(root=root, policy=WorkspacePolicy.coding())
    try:
        assert ws.decide_path("notes.txt") == "ask"  # read_file asks about it
        assert await ws.grep("SECRET") == []
        assert await ws.grep("SECRET", glob="*.txt") == []
        assert [m.path for m in await ws.grep("harmless")] == ["inside.txt"]
        # Named on its own (so approved by whoever answered read_file's question), it is searched.
        assert [m.text for m in await ws.grep("SECRET", path="notes.txt")] == [SECRET]
    finally:
        await ws.close()


async def test_a_link_swapped_after_the_approval_check_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink("inside.txt", root / "swap")
    ws = LocalWorkspaceSession(root=root, policy=WorkspacePolicy.coding())
    ctx = SimpleNamespace(workspace=ws)
    try:
        assert path_needs_approval("read")({"path": "swap"}, ctx) is False  # lands inside: no question
        os.unlink(root / "swap")
        os.symlink(outside / "secret.txt", root / "swap")
        with pytest.raises(PermissionDeniedError, match="changed between") as info:
            await read_file(ctx, "swap")  # type: ignore[arg-type]
        assert info.value.hint
        # A fresh call is judged afresh: now it asks.
        assert path_needs_approval("read")({"path": "swap"}, ctx) is True
    finally:
        await ws.close()


async def test_a_hard_link_renamed_over_the_checked_name_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ws = LocalWorkspaceSession(root=root, policy=WorkspacePolicy.coding())
    ctx = SimpleNamespace(workspace=ws)
    try:
        assert path_needs_approval("read")({"path": "inside.txt"}, ctx) is False
        os.link(outside / "secret.txt", root / "tmp-link")
        os.replace(root / "tmp-link", root / "inside.txt")
        with pytest.raises(PermissionDeniedError, match="changed between"):
            await read_file(ctx, "inside.txt")  # type: ignore[arg-type]
    finally:
        await ws.close()


async def test_240_reads_racing_a_symlink_swap_loop_never_return_outside_contents(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    os.symlink("inside.txt", root / "swap")
    swapper = subprocess.Popen(
        [
            "sh",
            "-c",
            f"while :; do ln -sfn inside.txt swap.tmp && mv -T swap.tmp swap; "
            f'ln -sfn "{outside}/secret.txt" swap.tmp && mv -T swap.tmp swap; done',
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ws = LocalWorkspaceSession(root=root, policy=WorkspacePolicy.coding())
    ctx = SimpleNamespace(workspace=ws)
    needs = path_needs_approval("read")
    leaked = served = refused = 0
    try:
        for _ in range(240):
            try:
                if needs({"path": "swap"}, ctx):
                    refused += 1  # the user says no to reading outside
                    continue
                await asyncio.sleep(0.002)  # the run loop emits events between approval and execution
                content = (await read_file(ctx, "swap")).content  # type: ignore[arg-type]
            except WorkspaceError:
                refused += 1
                continue
            served += 1
            leaked += SECRET in content
    finally:
        swapper.kill()
        swapper.wait()
        await ws.close()
    assert leaked == 0
    assert served > 0 and refused > 0
