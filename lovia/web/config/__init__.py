"""Model configuration of ``lovia web``: ``config.json``, connection tests, and hot switching.

The CLI's default agent is built from the chat profile of :class:`WebConfig`; the Settings dialog
edits the document through ``/api/config*`` and :class:`ConfigRuntime` swaps the agent in place.
"""

from __future__ import annotations

from .check import format_app_summary, format_summary, format_unconfigured_summary, mask_key, run_check
from .probe import ValidationOutcome, build_provider, known_context_window, unlisted_model_note, validate_connection
from .runtime import ConfigRuntime
from .schema import (
    ANTHROPIC_FLAVOR,
    DEFAULT_SKILLS_DIR,
    OPENAI_FLAVOR,
    USER_SKILLS_DIR,
    Connection,
    ModelProfile,
    ProviderFlavor,
    Roles,
    SearchConfig,
    SkillsConfig,
    WebConfig,
    flavor_for_model,
    slugify,
)
from .skills import RootStatus, resolve_skills_dirs, scan_skills_status
from .storage import (
    CONFIG_HINT,
    PROJECT_CONFIG_LABEL,
    USER_CONFIG_LABEL,
    LoadedConfig,
    load_active,
    load_config,
    project_config_path,
    save_config,
    user_config_path,
)

__all__ = [
    "ANTHROPIC_FLAVOR",
    "CONFIG_HINT",
    "DEFAULT_SKILLS_DIR",
    "OPENAI_FLAVOR",
    "PROJECT_CONFIG_LABEL",
    "USER_CONFIG_LABEL",
    "USER_SKILLS_DIR",
    "ConfigRuntime",
    "Connection",
    "LoadedConfig",
    "ModelProfile",
    "ProviderFlavor",
    "Roles",
    "RootStatus",
    "SearchConfig",
    "SkillsConfig",
    "ValidationOutcome",
    "WebConfig",
    "build_provider",
    "flavor_for_model",
    "format_app_summary",
    "format_summary",
    "format_unconfigured_summary",
    "known_context_window",
    "load_active",
    "load_config",
    "mask_key",
    "project_config_path",
    "resolve_skills_dirs",
    "run_check",
    "save_config",
    "scan_skills_status",
    "slugify",
    "unlisted_model_note",
    "user_config_path",
    "validate_connection",
]
