"""Logging under the ``lovia`` logger (silent by default) and ``enable_logging``."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

__all__ = ["enable_logging"]

logger = logging.getLogger("lovia")
logger.addHandler(logging.NullHandler())

_HANDLER_NAME = "lovia-enable-logging"
_COLORS = {"DEBUG": "\033[2m", "INFO": "\033[36m", "WARNING": "\033[33m", "ERROR": "\033[31m", "CRITICAL": "\033[31;1m"}


class _ColorFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        color = _COLORS.get(record.levelname)
        return f"{color}{text}\033[0m" if color else text


def enable_logging(
    level: int | str = logging.INFO,
    *,
    format: str = "%(asctime)s %(levelname)s %(name)s: %(message)s",
    datefmt: str = "%H:%M:%S",
    stream: TextIO | None = None,
    color: bool | None = None,
    propagate: bool = False,
) -> logging.Logger:
    """Print lovia's log narrative (``run.start``, ``tool.start``...). Idempotent; honours ``NO_COLOR``."""
    out = stream or sys.stderr
    if color is None:
        color = hasattr(out, "isatty") and out.isatty() and not os.environ.get("NO_COLOR")
    for handler in list(logger.handlers):
        if handler.get_name() == _HANDLER_NAME:
            logger.removeHandler(handler)
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter((_ColorFormatter if color else logging.Formatter)(format, datefmt))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate
    return logger
