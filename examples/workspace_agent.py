"""A coding agent in a workspace: it reads a bug, fixes it, runs the tests, and hits the policy.

Run it: ``python examples/workspace_agent.py`` (offline: the model is scripted).

What you see: the agent's tool calls and results; ``cat .env`` denied by the command guard; a
command outside the allow-list refused because nobody approved it; the test run passing after
the fix; and a dev server started in the background that is gone when the run ends.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from lovia import Agent, Runner, events
from lovia.testing import ScriptedProvider, call, text
from lovia.workspace import CommandRule, Workspace

APP = "def total(prices):\n    return sum(prices) - 1  # bug\n"
TEST = "import app\nassert app.total([1, 2, 3]) == 6, app.total([1, 2, 3])\nprint('tests passed')\n"


def script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            call("grep_files", {"pattern": "bug"}),
            call("read_file", {"path": "app.py"}),
            call("edit_file", {"path": "app.py", "old": "sum(prices) - 1  # bug", "new": "sum(prices)"}),
            call("shell", {"command": "cat .env"}),
            call("shell", {"command": "curl https://example.com"}),
            call("shell", {"command": "python test_app.py"}),
            call("shell", {"command": "python -m http.server 0", "background": True}),
            text("Fixed total(): the tests pass."),
        ]
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "app.py").write_text(APP)
        (root / "test_app.py").write_text(TEST)
        (root / ".env").write_text("API_KEY=do-not-show\n")
        workspace = Workspace.local(
            folder,
            mode="coding",
            denied_paths=(".env*",),
            command_rules=(CommandRule("python", "allow"),),
        )
        agent = Agent(name="coder", instructions="Fix bugs with small edits.", model=script(), workspace=workspace)
        handle = Runner.stream(agent, "total() is off by one. Fix it and run the tests.")
        async for event in handle:
            if isinstance(event, events.ToolCallCompleted):
                shown = " / ".join(line.strip() for line in str(event.output).splitlines()[:3] if line.strip())
                print(f"{event.call.name} {event.call.arguments}\n    -> {shown[:150]}")
        result = await handle.result()
        print("answer:", result.output)
        print("app.py now:", (root / "app.py").read_text().strip().splitlines()[-1].strip())


if __name__ == "__main__":
    asyncio.run(main())
