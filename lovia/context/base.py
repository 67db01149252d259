"""Former home of the context-policy seam; everything now lives in :mod:`lovia.context.policy`."""

from __future__ import annotations

from .policy import CompactionRequest, ContextPolicy, ContextResult, NoopContextPolicy

__all__ = ["CompactionRequest", "ContextPolicy", "ContextResult", "NoopContextPolicy"]
