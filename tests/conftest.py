"""Suite-wide test hooks."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


def _utf8_safe(value: Any) -> Any:
    """``value`` with every string made encodable as UTF-8 (lone surrogates written as escapes)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_utf8_safe(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Generator[None, Any, Any]:
    """Reports travel from xdist workers as UTF-8: fuzz tests log text with lone surrogates
    (hostile input on purpose), which would otherwise crash the transport and end the run."""
    data = yield
    return _utf8_safe(data) if data is not None else None
