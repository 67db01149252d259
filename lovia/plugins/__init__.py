"""Plugins: bundles of tools, prompt text, per-turn view entries, hooks and guardrails.

The protocol and the per-run instance live in :mod:`lovia.plugins.base`; they are re-exported here.
"""

from __future__ import annotations

from .base import Plugin, PluginInstance, ViewInjector, setup_plugin

__all__ = ["Plugin", "PluginInstance", "ViewInjector", "setup_plugin"]
