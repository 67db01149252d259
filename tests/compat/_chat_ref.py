"""Where 0.9.119's fixture files are (one place decides: ``_fixtures.FIXTURES``)."""

from __future__ import annotations

from ._fixtures import FIXTURES as REF

__all__ = ["REF"]
