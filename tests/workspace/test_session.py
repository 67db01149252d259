"""The session's file operations, limits and policy decisions on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lovia.exceptions import UserError
from lovia.workspace import (
    CommandRule,
    LocalWorkspaceSession,
    PathRule,
    PermissionDeniedError,
    Workspace,
    WorkspaceClosedError,
    WorkspaceError,
    WorkspaceLimits,
    WorkspacePolicy,
)
from lovia.workspace.command_guard import extract_path_claims
from lovia.workspace.policy import merge_decisions


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    r.mkdir()
    (r / "a.py").write_text("import os\n# TODO one\nprint('x')\n")
    (r / "pkg").mkdir()
    (r / "pkg" / "b.py").write_text("def f():\n    return 1  # TODO two\n")
    (r / "notes.md").write_text("hello\r\nworld\r\n")
    (r / ".hidden").write_text("TODO hidden\n")
    return r


async def open_ws(root: Path, **kwargs) -> LocalWorkspaceSession:
    return await Workspace.local(str(root), **kwargs).open()


# ---------------------------------------------------------------------- reading


async def test_read_text_pages_by_line(root):
    ws = await open_ws(root)
    whole = await ws.read_text("a.py")
    assert (whole.start, whole.end, whole.total_lines, whole.truncated) == (1, 3, 3, False)
    part = await ws.read_text("a.py", start=2, end=2)
    assert part.content == "# TODO one\n" and (part.start, part.end) == (2, 2)
    past = await ws.read_text("a.py", start=10)  # 0.9.119: empty content, with the line count
    assert (past.content, past.total_lines) == ("", 3)
    with pytest.raises(WorkspaceError, match="does not exist"):
        await ws.read_text("missing.txt")


async def test_read_is_capped_in_chars_and_the_cut_is_announced(root):
    (root / "long.txt").write_text("".join(f"line {i:05d}\n" for i in range(2000)))
    ws = await open_ws(root, limits=WorkspaceLimits(max_file_read_chars=1000))
    page = await ws.read_text("long.txt")
    assert page.truncated and len(page.content) <= 1000 and page.end < page.total_lines
    nxt = await ws.read_text("long.txt", start=page.end + 1)
    assert nxt.content.startswith(f"line {page.end:05d}")


async def test_read_bytes_limit(root):
    ws = await open_ws(root, limits=WorkspaceLimits(max_file_read_bytes=10))
    with pytest.raises(WorkspaceError, match="over the 10-byte limit"):
        await ws.read_bytes("a.py")
    assert (await ws.read_bytes("a.py", max_bytes=100)).data.startswith(b"import")


# ---------------------------------------------------------------------- writing and editing


async def test_write_creates_parents_is_atomic_and_idempotent(root):
    ws = await open_ws(root)
    first = await ws.write_text("new/deep/file.txt", "content\n")
    assert (first.action, first.bytes_written) == ("created", 8)
    again = await ws.write_text("new/deep/file.txt", "content\n")
    assert again.action == "unchanged"
    changed = await ws.write_text("new/deep/file.txt", "other\n")
    assert changed.action == "updated"
    assert (root / "new/deep/file.txt").read_text() == "other\n"
    assert not [p for p in (root / "new/deep").iterdir() if p.name.endswith(".tmp")]


async def test_write_keeps_the_file_mode(root):
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    ws = await open_ws(root)
    await ws.write_text("run.sh", "#!/bin/sh\necho hi\n")
    assert os.stat(script).st_mode & 0o777 == 0o755


async def test_create_only_refuses_overwrite(root):
    ws = await open_ws(root)
    refused = await ws.write_text("a.py", "x", create_only=True)
    assert not refused.ok and refused.action == "unchanged" and "already exists" in (refused.message or "")
    assert (root / "a.py").read_text().startswith("import os")


async def test_edit_exact_match_rules(root):
    ws = await open_ws(root)
    missing = await ws.edit_text("a.py", "nothing like this", "x")
    assert not missing.ok and "not found" in (missing.message or "")
    (root / "dup.txt").write_text("x\nx\n")
    twice = await ws.edit_text("dup.txt", "x", "y")
    assert not twice.ok and "occurs 2 times" in (twice.message or "") and (root / "dup.txt").read_text() == "x\nx\n"
    done = await ws.edit_text("dup.txt", "x", "y", replace_all=True)
    assert done.replacements == 2 and (root / "dup.txt").read_text() == "y\ny\n"
    one = await ws.edit_text("a.py", "print('x')", "print('y')")
    assert one.changed and "print('y')" in (root / "a.py").read_text()


async def test_edit_is_idempotent_by_content(root):
    ws = await open_ws(root)
    await ws.edit_text("a.py", "# TODO one", "# DONE one")
    again = await ws.edit_text("a.py", "# TODO one", "# DONE one")
    assert again.ok and not again.changed and again.message == "already applied"


async def test_edit_tolerates_crlf(root):
    ws = await open_ws(root)
    result = await ws.edit_text("notes.md", "hello\nworld", "hi\nthere")
    assert result.changed
    assert (root / "notes.md").read_bytes() == b"hi\r\nthere\r\n"


# ---------------------------------------------------------------------- listing and grep


async def test_list_files_direct_and_recursive(root):
    ws = await open_ws(root)
    top = [e.path for e in await ws.list_files(".")]
    assert top == ["pkg", "a.py", "notes.md"]  # 0.9.119: directories first, then files
    hidden = [e.path for e in await ws.list_files(".", include_hidden=True)]
    assert ".hidden" in hidden
    py = [e.path for e in await ws.list_files(".", pattern="**/*.py")]
    assert py == ["a.py", "pkg/b.py"]
    only_pkg = [e.path for e in await ws.list_files("pkg")]
    assert only_pkg == ["pkg/b.py"]


async def test_list_and_grep_caps_are_announced(root):
    for i in range(30):
        (root / f"f{i:02d}.txt").write_text("TODO\n")
    ws = await open_ws(root, limits=WorkspaceLimits(max_list_results=10, max_grep_matches=5))
    listed = await ws.list_files(".")
    assert len(listed) == 10 and listed.truncated  # type: ignore[attr-defined]
    hits = await ws.grep("TODO")
    assert len(hits) == 5 and hits.truncated  # type: ignore[attr-defined]
    explicit = await ws.list_files(".", max_results=40)
    assert not explicit.truncated  # type: ignore[attr-defined]


async def test_grep_regex_glob_case_and_line_caps(root):
    (root / "wide.txt").write_text("TODO " + "y" * 1000 + "\n")
    ws = await open_ws(root, limits=WorkspaceLimits(max_grep_line_chars=50))
    hits = await ws.grep(r"TODO \w+", glob="*.py")
    assert [(h.path, h.line) for h in hits] == [("a.py", 2), ("pkg/b.py", 2)]
    assert [h.path for h in await ws.grep("todo", ignore_case=True, glob="*.py")] == ["a.py", "pkg/b.py"]
    wide = await ws.grep("TODO", path="wide.txt")
    assert wide[0].text.endswith("[... line truncated]") and len(wide[0].text) < 80
    assert [h.path for h in await ws.grep("TODO hidden", include_hidden=True)] == [".hidden"]
    with pytest.raises(WorkspaceError, match="invalid regular expression"):
        await ws.grep("(")


async def test_grep_skips_binary_and_oversized_files(root):
    (root / "blob.bin").write_bytes(b"TODO\x00\x00")
    (root / "huge.txt").write_text("TODO\n" * 1000)
    ws = await open_ws(root, limits=WorkspaceLimits(max_grep_file_bytes=1000))
    paths = {h.path for h in await ws.grep("TODO")}
    assert "blob.bin" not in paths and "huge.txt" not in paths and "a.py" in paths


# ---------------------------------------------------------------------- policy


@pytest.mark.parametrize(
    ("mode", "write", "read_out", "write_out", "shell"),
    [
        ("readonly", "deny", "deny", "deny", "deny"),
        ("coding", "allow", "ask", "deny", "ask"),
        ("trusted", "allow", "allow", "ask", "allow"),
    ],
)
async def test_mode_presets(root, tmp_path, mode, write, read_out, write_out, shell):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    ws = await open_ws(root, mode=mode)
    assert ws.decide_path("a.py") == "allow"
    assert ws.decide_path("a.py", write=True) == write
    assert ws.decide_path(str(outside)) == read_out
    assert ws.decide_path(str(outside), write=True) == write_out
    assert ws.decide_command("ls") == shell


async def test_readonly_refuses_writes_and_shell_at_the_session(root):
    ws = await open_ws(root, mode="readonly")
    with pytest.raises(PermissionDeniedError):
        await ws.write_text("a.py", "x")
    with pytest.raises(PermissionDeniedError):
        await ws.edit_text("a.py", "import", "export")
    with pytest.raises(PermissionDeniedError, match="does not allow shell"):
        await ws.run("ls")


async def test_grants_denials_and_precedence(root, tmp_path):
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "doc.txt").write_text("ref\n")
    ws = await open_ws(root, readable=(str(ref),), denied_paths=("*.md",), writable=("~/never-used",))
    assert (await ws.read_text(str(ref / "doc.txt"))).content == "ref\n"
    assert ws.decide_path(str(ref / "doc.txt"), write=True) == "deny"
    with pytest.raises(PermissionDeniedError):
        await ws.read_text("notes.md")
    # denied_paths beats an explicit grant
    ws2 = await open_ws(root, readable=(str(root / "notes.md"),), denied_paths=("notes.md",))
    assert ws2.decide_path("notes.md") == "deny"
    rules = await open_ws(root, path_rules=(PathRule("pkg/**", "deny", frozenset({"write"})),))
    assert rules.decide_path("pkg/b.py") == "allow" and rules.decide_path("pkg/b.py", write=True) == "deny"


def test_local_validates_its_arguments(root):
    with pytest.raises(UserError, match="unknown workspace mode"):
        Workspace.local(str(root), mode="yolo")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="cannot be combined"):
        Workspace.local(str(root), policy=WorkspacePolicy(), denied_paths=(".env",))
    with pytest.raises(UserError, match="not a decision"):
        CommandRule("ls", "maybe")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not available"):
        Workspace.docker("image")
    with pytest.raises(UserError):
        Workspace()


async def test_a_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="not a directory") as info:  # 0.9.119: a UserError
        await Workspace.local(str(tmp_path / "nope")).open()
    assert info.value.hint


def test_command_rules_word_boundaries_and_compounds():
    policy = WorkspacePolicy.coding(
        command_rules=(CommandRule("git push", "deny"), CommandRule("pytest", "allow"), CommandRule("git", "allow"))
    )
    assert policy.decide_command("git push origin main") == "deny"
    assert policy.decide_command("git pushx") == "allow"
    assert policy.decide_command("pytest -q") == "allow"
    assert policy.decide_command("pytestx") == "ask"
    assert policy.decide_command("pytest && git push") == "deny"
    assert policy.decide_command("pytest | tee log; rm -rf /") == "ask"
    assert policy.decide_command("FOO=1 pytest") == "allow"
    assert policy.decide_command("   ") == "deny"
    assert merge_decisions("allow", "ask") == "ask" and merge_decisions() == "allow"


def test_command_decider_is_consulted_after_rules():
    policy = WorkspacePolicy.coding(
        command_rules=(CommandRule("ls", "allow"),), command_decider=lambda seg: "deny" if "curl" in seg else None
    )
    assert policy.decide_command("ls") == "allow"
    assert policy.decide_command("curl http://x") == "deny"
    assert policy.decide_command("make") == "ask"


def test_the_guard_extracts_redirects_and_paths():
    assert extract_path_claims("echo hi 2>&1 > out.txt") == [("write", "out.txt")]
    assert extract_path_claims("cat < in.txt | wc -l") == [("read", "in.txt")]
    assert ("write", "log") in extract_path_claims("make &>> log")
    assert extract_path_claims("python -c 'print(1)'") == []
    assert extract_path_claims("echo x > /dev/null") == []


async def test_the_guard_denies_a_command_naming_a_denied_path(root):
    ws = await open_ws(root, mode="trusted", denied_paths=("notes.md",))
    assert ws.decide_command("wc -l a.py") == "allow"
    assert ws.decide_command("wc -l notes.md") == "deny"
    assert ws.decide_command("echo x > notes.md") == "deny"
    with pytest.raises(PermissionDeniedError):
        await ws.run("cat notes.md")


async def test_closed_sessions_refuse_everything(root):
    ws = await open_ws(root, mode="trusted")
    await ws.close()
    for op in (ws.read_text("a.py"), ws.write_text("x", "y"), ws.list_files("."), ws.run("ls"), ws.grep("x")):
        with pytest.raises(WorkspaceClosedError):
            await op
    await ws.close()  # idempotent


async def test_view_image_returns_an_image_part(root):
    import base64
    from types import SimpleNamespace

    from lovia.parts import ImagePart
    from lovia.workspace.tools import require_workspace, view_image

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    (root / "dot.png").write_bytes(png)
    ctx = SimpleNamespace(workspace=await open_ws(root))
    parts = await view_image(ctx, "dot.png")  # type: ignore[arg-type]
    image = parts[-1]
    assert isinstance(image, ImagePart) and image.mime_type == "image/png" and base64.b64decode(image.data) == png
    with pytest.raises(WorkspaceError, match="does not look like an image"):
        await view_image(ctx, "a.py")  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="no workspace"):
        require_workspace(SimpleNamespace(workspace=None))  # type: ignore[arg-type]
