"""Where 0.9.119's fixture files are: beside the checkout, or beside its worktrees' folder."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve()
_WHERE = Path("shared") / "fixtures" / "lovia-0.9.119"

REF = next((p / _WHERE for p in _HERE.parents[2:] if (p / _WHERE).is_dir()), _HERE.parents[2].parent / _WHERE)
"""The first ``shared/fixtures/lovia-0.9.119`` above the checkout (``/work`` beside ``/work/main``)."""
