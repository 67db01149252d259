"""PostgreSQL stores: :class:`PostgresSession` and :class:`PostgresCheckpointer` (psycopg 3, pooled).

For many workers on many hosts sharing one store. Needs the extra: ``pip install 'lovia[postgres]'``
(importing this package without it raises :class:`~lovia.exceptions.UserError` with that hint).
Both may share one database, schema and pool; each keeps its schema version in ``lovia_schema``.
"""

from __future__ import annotations

from ._db import import_driver

import_driver()

from .checkpointer import PostgresCheckpointer  # noqa: E402
from .session import PostgresSession  # noqa: E402

__all__ = ["PostgresCheckpointer", "PostgresSession"]
