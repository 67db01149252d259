"""Context management: policies that shape the per-call view, result stores, recall."""

from __future__ import annotations

from .base import CompactionRequest, ContextPolicy, ContextResult, NoopContextPolicy

__all__ = ["CompactionRequest", "ContextPolicy", "ContextResult", "NoopContextPolicy"]
