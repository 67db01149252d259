"""Where ``config.json`` lives and how it is read and written.

Two scopes: ``./.lovia/config.json`` (this project) replaces ``~/.lovia/config.json`` (this user)
as a whole when it exists; the two are never merged. Writes go to a temporary file in the same
folder, which then replaces the old one (``os.replace``), so a reader sees the old document or
the new one, never half of one. The file is readable and writable by its owner only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ...exceptions import UserError
from .schema import WebConfig

__all__ = [
    "CONFIG_DIR",
    "CONFIG_HINT",
    "CONFIG_NAME",
    "PROJECT_CONFIG_LABEL",
    "USER_CONFIG_LABEL",
    "LoadedConfig",
    "load_active",
    "load_config",
    "project_config_path",
    "save_config",
    "user_config_path",
]

CONFIG_HINT = (
    "start `lovia web` and open the printed URL — Settings → Models — or write ~/.lovia/config.json "
    "(or ./.lovia/config.json for this project)"
)
CONFIG_DIR = Path(".lovia")
CONFIG_NAME = "config.json"
PROJECT_CONFIG_LABEL = ".lovia/config.json"
USER_CONFIG_LABEL = "~/.lovia/config.json"


def project_config_path() -> Path:
    """``./.lovia/config.json`` under the current folder."""
    return Path.cwd() / CONFIG_DIR / CONFIG_NAME


def user_config_path() -> Path:
    """``~/.lovia/config.json`` of the current user."""
    return Path.home() / CONFIG_DIR / CONFIG_NAME


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The active configuration, the file it came from (or would be written to), and whether it exists."""

    config: WebConfig
    path: Path
    label: str
    exists: bool


def load_config(path: Path) -> WebConfig | None:
    """Read and validate one file; ``None`` when it does not exist.

    Raises:
        UserError: The file is unreadable, not JSON, or not a valid configuration.
    """
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}", hint="check the file's permissions") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON: {exc.msg} (line {exc.lineno})", hint="fix the file or delete it"
        ) from exc
    try:
        return WebConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "document"
        raise UserError(
            f"{path} is not a valid lovia configuration: {where}: {first.get('msg')}",
            hint="fix the field, or delete the file and configure again in Settings",
        ) from exc


def load_active() -> LoadedConfig:
    """The project file when it exists, else the user file; an empty configuration when neither does
    (it would be saved to the user file)."""
    project = project_config_path()
    found = load_config(project)
    if found is not None:
        return LoadedConfig(found, project, PROJECT_CONFIG_LABEL, True)
    user = user_config_path()
    found = load_config(user)
    if found is not None:
        return LoadedConfig(found, user, USER_CONFIG_LABEL, True)
    return LoadedConfig(WebConfig(), user, USER_CONFIG_LABEL, False)


def save_config(config: WebConfig, path: Path | None = None) -> Path:
    """Write ``config`` atomically (owner-only permissions) to ``path`` (default: the user file).

    Returns:
        The path written.
    """
    target = path or user_config_path()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps(config.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            with contextlib.suppress(OSError):  # no Unix permissions on this platform
                os.fchmod(fh.fileno(), 0o600)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if target.parent.name == CONFIG_DIR.name:
        _ignore_in_git(target.parent.parent)
    return target


def _ignore_in_git(folder: Path) -> None:
    """Add ``.lovia/`` to the ``.gitignore`` of a git checkout (keys and chats stay out of commits)."""
    if not (folder / ".git").exists():
        return
    ignore = folder / ".gitignore"
    try:
        lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
        if any(line.strip() in (".lovia", ".lovia/", "/.lovia", "/.lovia/") for line in lines):
            return
        with ignore.open("a", encoding="utf-8") as fh:
            prefix = "\n" if lines and lines[-1] != "" and not ignore.read_text(encoding="utf-8").endswith("\n") else ""
            fh.write(f"{prefix}.lovia/\n")
    except OSError:
        pass  # a read-only checkout: the keys are still protected by the file's permissions
