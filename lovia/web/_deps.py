"""The web extra's dependencies, imported lazily so core lovia never needs them."""

from __future__ import annotations

import importlib.util

from ..exceptions import UserError

__all__ = ["require_web"]


def require_web() -> None:
    """Raise a helpful ``UserError`` when FastAPI or uvicorn is missing."""
    missing = [name for name in ("fastapi", "uvicorn", "jinja2") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"the web app needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed",
            hint="pip install 'lovia[web]'",
        )
