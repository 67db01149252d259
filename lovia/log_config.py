"""``enable_logging``: print lovia's log narrative (``run.start``, ``model.done``, ``tool.start``...).

The ``lovia`` logger is silent by default (a ``NullHandler``). ``enable_logging()`` attaches one
handler of its own (re-calling replaces it), as colored text on a terminal or, with
``json=True``, one JSON object per line whose ``key=value`` pairs become fields.
"""

from __future__ import annotations

import json as _json
import logging
import os
import re
import sys
import time
from typing import Any, TextIO

from .exceptions import UserError

__all__ = ["ColorFormatter", "JsonFormatter", "enable_logging", "supports_color"]

DEFAULT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_HANDLER_NAME = "lovia-enable-logging"
_COLORS = {"DEBUG": "\033[2m", "INFO": "\033[36m", "WARNING": "\033[33m", "ERROR": "\033[31m", "CRITICAL": "\033[31;1m"}
# ``key=value``; a value stops at a parenthesis, so ``tokens=12(in=10 out=2)`` gives three fields.
_PAIR = re.compile(r"(\w+)=([^\s()]+)")
# Attributes every LogRecord has; anything else was passed with ``extra=`` and is kept as a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class ColorFormatter(logging.Formatter):
    """Colors each line by its level (ANSI)."""

    def format(self, record: logging.LogRecord) -> str:
        """The plain line wrapped in its level's color."""
        text = super().format(record)
        color = _COLORS.get(record.levelname)
        return f"{color}{text}\033[0m" if color else text


def _scalar(value: str) -> Any:
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if re.fullmatch(r"-?\d+\.\d+", value):
        return float(value)
    return {"True": True, "False": False, "None": None}.get(value, value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``event``, ``message`` plus fields.

    lovia's messages read ``event key=value ...``: the first word becomes ``event`` and each
    ``key=value`` a field (numbers as numbers); ``extra=`` attributes are fields too.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Serialize ``record``."""
        message = record.getMessage()
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
        }
        head = message.split(" ", 1)[0]
        if head and "=" not in head:
            data["event"] = head
        data["message"] = message
        for key, value in _PAIR.findall(message):
            data.setdefault(key, _scalar(value))
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data.setdefault(key, value)
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return _json.dumps(data, ensure_ascii=False, default=str)


def supports_color(stream: TextIO) -> bool:
    """True for a terminal when ``NO_COLOR`` is not set."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def _level(level: int | str) -> int:
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    name = str(level).strip().upper()
    if name == "WARN":
        name = "WARNING"
    if name not in LEVELS:
        raise UserError(f"unknown log level {level!r}", hint=f"use one of {', '.join(LEVELS)} (or a logging.* int)")
    return int(getattr(logging, name))


def enable_logging(
    level: int | str = logging.INFO,
    *,
    format: str = DEFAULT_FORMAT,
    datefmt: str = "%H:%M:%S",
    stream: TextIO | None = None,
    color: bool | None = None,
    propagate: bool = False,
    json: bool = False,
) -> logging.Logger:
    """Send the ``lovia`` logger to ``stream`` (default stderr) at ``level``; returns the logger.

    Levels: ``DEBUG`` (every model call and tool start), ``INFO`` (run start/handoff/done),
    ``WARNING`` (retries, context overflow, failing hooks), ``ERROR``. Idempotent; ``color=None``
    colors a terminal unless ``NO_COLOR`` is set; ``json=True`` writes JSON lines (never colored);
    ``propagate=True`` also hands records to the root logger.
    """
    logger = logging.getLogger("lovia")
    out = stream or sys.stderr
    numeric = _level(level)
    for handler in list(logger.handlers):
        if handler.get_name() == _HANDLER_NAME:
            logger.removeHandler(handler)
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    formatter: logging.Formatter
    if json:
        formatter = JsonFormatter()
    else:
        use_color = supports_color(out) if color is None else color
        formatter = (ColorFormatter if use_color else logging.Formatter)(format, datefmt)
    handler.setFormatter(formatter)
    logger.addHandler(handler)
    logger.setLevel(numeric)
    logger.propagate = propagate
    return logger
