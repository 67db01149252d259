"""Result stores under the module name the reference layout uses (the code is in :mod:`lovia.context.stores`)."""

from __future__ import annotations

from .stores import FileResultStore, InMemoryResultStore, ResultStore

__all__ = ["FileResultStore", "InMemoryResultStore", "ResultStore"]
