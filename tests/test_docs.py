"""The documentation's examples run, and the ``lovia`` command is fully documented.

Python blocks: a fenced ```python block whose first line is ``# runnable`` must run as written,
offline, in a fresh temporary directory. A model string on a line carrying a ``# placeholder``
comment is the one substitution: it becomes a ``ScriptedProvider``. Top-level ``await`` is
allowed (the block then runs in ``asyncio.run``).

Some snippets continue an earlier one on their page (they use an ``agent`` defined above it).
``CONTINUATIONS`` runs those too, after a small prelude that supplies exactly the missing names.

CLI: every subcommand and flag that ``lovia ... --help`` prints must be mentioned in the pages, each
flag on a line naming its command (a synopsis line) or in a flag table right after such a line.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
from pathlib import Path

import pytest

from lovia.cli import main as lovia_main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "README.md",
    "docs/runtime.md",
    "docs/sessions.md",
    "docs/checkpoints.md",
    "docs/context.md",
    "docs/providers.md",
    "docs/web.md",
    "docs/deployment.md",
    "docs/custom-stores.md",
    "docs/benchmarks.md",
    "docs/eval.md",
    "docs/observability.md",
    "bench/README.md",
]
MARK = "# runnable"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PLACEHOLDER = re.compile(r'model="[^"]*",(\s*# placeholder\b.*)$', re.M)
SCRIPTED = (
    "model=__import__('lovia.testing', fromlist=['x']).ScriptedProvider("
    "lambda entries, tools: __import__('lovia.testing', fromlist=['x']).text('(scripted answer)')),"
)

# A scripted agent standing in for the ``agent`` a page defines elsewhere.
AGENT = """
from lovia import Agent
from lovia.testing import ScriptedProvider, text
agent = Agent(name="assistant", model=ScriptedProvider(lambda entries, tools: text("Atlas")))
"""

# (page, first line of the block) -> prelude. The block itself runs unchanged.
CONTINUATIONS: dict[tuple[str, str], str] = {
    ("README.md", "from uuid import uuid4"): AGENT + "from lovia import Runner\n",
    ("docs/sessions.md", "from lovia import Runner, SQLiteSession"): AGENT,
    ("docs/sessions.md", "trimmed = await session.trim_tool_results("): AGENT
    + "from lovia import Runner, SQLiteSession\nsession = SQLiteSession('chat.db')\n"
    + "await Runner.run(agent, 'hi', session=session, session_id='u1')\n",
    (
        "docs/sessions.md",
        "for info in await session.list_sessions(",
    ): "from lovia import SQLiteCheckpointer, SQLiteSession\n"
    + "session, checkpointer = SQLiteSession('s.db'), SQLiteCheckpointer('s.db')\n",
    ("docs/sessions.md", "lease = await cp.acquire_lease("): "from lovia import RunHead, SQLiteCheckpointer\n"
    + "cp, run_id, entries, head = SQLiteCheckpointer('c.db'), 'r1', [], RunHead(agent_name='a')\n",
    ("docs/checkpoints.md", "from uuid import uuid4"): AGENT,
    ("docs/checkpoints.md", "await Runner.run(agent, [], checkpoint="): AGENT
    + "from lovia import CheckpointOptions, Runner, SQLiteCheckpointer\n"
    + "cp, rid = SQLiteCheckpointer('runs.db'), 'job-1'\n"
    + "await Runner.run(agent, 'go', checkpoint=CheckpointOptions(cp, rid))\n",
    ("docs/deployment.md", "from lovia import CheckpointOptions, Runner, SQLiteCheckpointer, SQLiteSession"): AGENT
    + "ticket_id = 'T-1'\n",
}


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == "python":
                found.append((page, text.count("\n", 0, m.start()) + 1, m.group(2)))
    return found


def _continuation(page: str, source: str) -> tuple[str, str] | None:
    """The ``CONTINUATIONS`` key whose page matches and whose first line starts this block."""
    first = source.split("\n", 1)[0]
    return next((key for key in CONTINUATIONS if key[0] == page and first.startswith(key[1])), None)


BLOCKS = _blocks()
RUNNABLE = [pytest.param(src, id=f"{page}:{line}") for page, line, src in BLOCKS if src.startswith(MARK + "\n")]
CONTINUED = [
    pytest.param(CONTINUATIONS[key], src, id=f"{page}:{line}")
    for page, line, src in BLOCKS
    if (key := _continuation(page, src)) is not None
]


def _execute(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = compile(source, "<doc block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, object] = {"__name__": "__doc_block__"}
    with contextlib.redirect_stdout(io.StringIO()):
        pending = eval(code, namespace)  # noqa: S307 - the docs' own examples
        if asyncio.iscoroutine(pending):
            asyncio.run(pending)


def test_pages_have_runnable_blocks() -> None:
    assert len(RUNNABLE) >= 5
    missing = sorted(set(CONTINUATIONS) - {_continuation(page, src) for page, _, src in BLOCKS})
    assert not missing, f"CONTINUATIONS names blocks no page has any more: {missing}"


@pytest.mark.parametrize("source", RUNNABLE)
def test_runnable_block(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _execute(PLACEHOLDER.sub(SCRIPTED + r"\1", source), tmp_path, monkeypatch)


@pytest.mark.parametrize(("prelude", "source"), CONTINUED)
def test_continued_block(prelude: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _execute(prelude + source, tmp_path, monkeypatch)


# --------------------------------------------------------------------------- the lovia command

OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
SUBCOMMANDS = re.compile(r"^  \{([\w,-]+)\}", re.M)


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        lovia_main([*argv, "--help"])
    return out.getvalue()


def _commands(prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], set[str]]]:
    """Every command path with the options its ``--help`` lists (``-h``/``--help`` left out)."""
    text = _help(*prefix)
    options = set(OPTION.findall(text.split("options:", 1)[-1])) - {"-h", "--help"}
    found = [(prefix, options)]
    m = SUBCOMMANDS.search(text)
    for name in m.group(1).split(",") if m else []:
        found += _commands((*prefix, name))
    return found


def _lines_about(usage: str, lines: list[str]) -> list[str]:
    """Lines naming ``usage`` (e.g. ``lovia runs ls``), plus a table right after such a line."""
    pattern = re.compile(re.escape(usage) + r"(?![\w-])")
    found: list[str] = []
    for i, line in enumerate(lines):
        if not pattern.search(line):
            continue
        found.append(line)
        rest = iter(lines[i + 1 :])
        following = next(rest, "")
        if not following.strip():
            following = next(rest, "")
        while following.startswith("|"):
            found.append(following)
            following = next(rest, "")
    return found


def test_every_cli_command_and_flag_is_documented() -> None:
    lines = [line for page in PAGES for line in (ROOT / page).read_text(encoding="utf-8").splitlines()]
    commands = _commands()
    assert {("runs", "ls"), ("sessions", "rewind"), ("demo",)} <= {path for path, _ in commands}
    missing = []
    for path, options in commands:
        usage = f"lovia {' '.join(path)}".rstrip()
        about = _lines_about(usage, lines)
        if not about:
            missing.append(usage)
        for option in sorted(options):
            if not any(re.search(re.escape(option) + r"(?![\w-])", line) for line in about):
                missing.append(f"{usage} {option}")
    assert not missing, f"not on a line naming the command (or its flag table) in {PAGES}: {missing}"
