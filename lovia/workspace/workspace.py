"""``Workspace.local(...)``: a root folder plus a policy, opened into one session per run (or per chat)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from ..exceptions import UserError
from .local import LocalWorkspaceSession
from .policy import CommandRule, PathRule, WorkspacePolicy
from .protocol import ShellExecutor, WorkspaceSession
from .types import WorkspaceLimits, WorkspaceMode

if TYPE_CHECKING:
    from ..plugins.base import ViewInjector
    from ..tools import Tool

__all__ = ["SCRATCH_DIR", "LocalWorkspace", "Workspace", "WorkspaceSessionBinding"]

SCRATCH_DIR = "tmp"
"""Where the generated instructions tell the model to put temporary work."""

_MODES = ("readonly", "coding", "trusted")


@dataclass(eq=False)
class LocalWorkspace:
    """A workspace on the local disk. Each ``open()`` gives a fresh :class:`LocalWorkspaceSession`."""

    root: str
    policy: WorkspacePolicy = field(default_factory=WorkspacePolicy.coding)
    env: Mapping[str, str] | None = None
    shell_timeout: float | None = 300.0
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)
    inherit_env: bool = False
    executor: ShellExecutor | None = None
    close_after_run: bool = True

    async def open(self) -> LocalWorkspaceSession:
        """A new live session (the caller closes it)."""
        return LocalWorkspaceSession(
            root=self.root,
            policy=self.policy,
            env=self.env,
            shell_timeout=self.shell_timeout,
            limits=self.limits,
            inherit_env=self.inherit_env,
            executor=self.executor,
        )

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[WorkspaceSessionBinding]:
        """Hold one session open across runs: ``async with ws.session() as bound: Agent(workspace=bound)``."""
        live = await self.open()
        try:
            yield WorkspaceSessionBinding(self, live)
        finally:
            await live.close()

    def bind(self, session: WorkspaceSession) -> WorkspaceSessionBinding:
        """A workspace whose runs all use ``session`` (owned and closed by the caller)."""
        return WorkspaceSessionBinding(self, session)

    def tools(self) -> list[Tool[Any]]:
        """The tool bundle this policy allows."""
        from .tools import build_tools

        return build_tools(self.policy)

    def view_injectors(self) -> list[ViewInjector]:
        """The per-turn background-process reminder (when the shell is available)."""
        from .tools import background_process_reminder

        return [background_process_reminder] if self.policy.allow_shell else []

    def instructions(self) -> str:
        """The generated ``## Workspace`` section of the system prompt, derived from the policy."""
        return render_instructions(self.root, self.policy)


@dataclass(eq=False)
class WorkspaceSessionBinding:
    """A :class:`LocalWorkspace` bound to one caller-owned session (``close_after_run`` is False)."""

    workspace: LocalWorkspace
    live: WorkspaceSession | None = None
    close_after_run: bool = False

    async def open(self) -> WorkspaceSession:
        """The bound session (the same one on every call)."""
        if self.live is None:
            self.live = await self.workspace.open()
        return self.live

    def tools(self) -> list[Tool[Any]]:
        """The workspace's tool bundle."""
        return self.workspace.tools()

    def instructions(self) -> str:
        """The workspace's generated prompt section."""
        return self.workspace.instructions()

    def view_injectors(self) -> list[ViewInjector]:
        """The workspace's per-turn reminders."""
        return self.workspace.view_injectors()


def _describe(decision: str) -> str:
    return {"allow": "allowed", "ask": "allowed after the user approves", "deny": "not allowed"}[decision]


def render_instructions(root: str, policy: WorkspacePolicy) -> str:
    """What the model is told about its workspace: never more than the session enforces."""
    lines = [
        "## Workspace",
        f"You work in the folder `{root}` (relative paths are resolved against it).",
        "- Reading files inside it: allowed.",
        f"- Writing files inside it: {_describe(policy.write)}.",
        f"- Reading files outside it: {_describe(policy.read_outside)}.",
        f"- Writing files outside it: {_describe(policy.write_outside)}.",
    ]
    if policy.allow_shell:
        lines.append(f"- Shell commands: {_describe(policy.shell_default)} by default.")
        for rule in policy.command_rules:
            lines.append(f"  - `{rule.pattern}`: {_describe(rule.action)}.")
        lines.append(
            "- Commands run with a minimal environment and a timeout. Start servers and watchers with "
            "shell(background=true) and check them with read_process_output."
        )
        lines.append(
            "- If the project needs Python packages, create `.venv` in the workspace first "
            "(`python -m venv .venv`); it is activated for every command. Never install globally."
        )
    else:
        lines.append("- Shell commands: not available.")
    if policy.denied_paths:
        shown = ", ".join(f"`{p}`" for p in policy.denied_paths)
        lines.append(f"- These paths are off limits, whatever else is allowed: {shown}.")
    if policy.can_write:
        lines.append(
            f"- Put temporary work in `{SCRATCH_DIR}/`, follow the existing layout of the project, "
            f"and never treat `{SCRATCH_DIR}/` as a deliverable."
        )
    lines.append("- A denied operation fails with an error: choose another way instead of retrying it.")
    if policy.allow_shell:
        lines.append("- The command guard is a lexical check, not a sandbox: stay within the task.")
    return "\n".join(lines)


class Workspace:
    """Factories for workspaces: :meth:`local` (``docker`` is not available yet)."""

    def __init__(self) -> None:
        raise UserError("Workspace is a namespace of factories", hint='use Workspace.local(".", mode="coding")')

    @staticmethod
    def local(
        root: str = ".",
        *,
        mode: WorkspaceMode = "coding",
        policy: WorkspacePolicy | None = None,
        readable: tuple[str, ...] = (),
        writable: tuple[str, ...] = (),
        denied_paths: tuple[str, ...] = (),
        path_rules: tuple[PathRule, ...] = (),
        command_rules: tuple[CommandRule, ...] = (),
        env: Mapping[str, str] | None = None,
        shell_timeout: float | None = 300.0,
        inherit_env: bool = False,
        limits: WorkspaceLimits | None = None,
        executor: ShellExecutor | None = None,
    ) -> LocalWorkspace:
        """A workspace on ``root`` with a preset ``mode`` refined by grants, denials and rules.

        Raises:
            UserError: Unknown mode, or ``policy=`` combined with the shorthand knobs.
        """
        if mode not in _MODES:
            raise UserError(f"unknown workspace mode {mode!r}", hint="use 'readonly', 'coding' or 'trusted'")
        if not isinstance(root, str) or not root:
            root = str(root) if root else ""
        if not root:
            raise UserError("the workspace root is empty", hint='Workspace.local(".")')
        knobs = bool(readable or writable or denied_paths or path_rules or command_rules)
        if policy is not None and knobs:
            raise UserError(
                "policy= cannot be combined with readable/writable/denied_paths/path_rules/command_rules",
                hint="put the rules into the WorkspacePolicy, or drop policy= and use the shorthand knobs",
            )
        if policy is None:
            # Writable grants first (read and write), then readable ones (read only), as in 0.9.119.
            grants = tuple(PathRule(p, "allow", frozenset({"read", "write"})) for p in writable) + tuple(
                PathRule(p, "allow", frozenset({"read"})) for p in readable
            )
            rules = (*tuple(path_rules), *grants)
            if mode == "readonly":
                if command_rules:
                    raise UserError("a readonly workspace has no shell", hint="drop command_rules or use mode='coding'")
                policy = WorkspacePolicy.readonly(denied_paths=tuple(denied_paths), path_rules=rules)
            elif mode == "coding":
                policy = WorkspacePolicy.coding(
                    command_rules=tuple(command_rules), denied_paths=tuple(denied_paths), path_rules=rules
                )
            else:
                policy = WorkspacePolicy.trusted(
                    command_rules=tuple(command_rules), denied_paths=tuple(denied_paths), path_rules=rules
                )
        return LocalWorkspace(
            root=root,
            policy=policy,
            env=env,
            shell_timeout=shell_timeout,
            limits=limits or WorkspaceLimits(),
            inherit_env=inherit_env,
            executor=executor,
        )

    @staticmethod
    def docker(*args: Any, **kwargs: Any) -> NoReturn:
        """Not available in this version."""
        raise UserError(
            "Workspace.docker is not available in this version of lovia",
            hint="use Workspace.local(...) with a ShellExecutor that runs commands in your container",
        )
