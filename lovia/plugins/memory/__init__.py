"""Memory: notes across sessions in the prompt, and a searchable archive of past conversations."""

from __future__ import annotations

from .index import Doc, Fusable, Hit, HybridIndex, Index, KeywordIndex
from .plugin import FileNotesStore, Memory, NotesStore
from .vector import Embedder, OpenAIEmbedder, VectorIndex

__all__ = [
    "Doc",
    "Embedder",
    "FileNotesStore",
    "Fusable",
    "Hit",
    "HybridIndex",
    "Index",
    "KeywordIndex",
    "Memory",
    "NotesStore",
    "OpenAIEmbedder",
    "VectorIndex",
]
