"""Model providers: the protocol, the vendor adapters and the ``vendor:model`` registry."""

from __future__ import annotations

from .base import ModelSettings, Provider

__all__ = ["ModelSettings", "Provider"]
