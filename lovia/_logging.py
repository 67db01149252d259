"""The ``lovia`` logger (silent by default); ``enable_logging`` lives in :mod:`lovia.log_config`."""

from __future__ import annotations

import logging

from .log_config import enable_logging

__all__ = ["enable_logging", "logger"]

logger = logging.getLogger("lovia")
logger.addHandler(logging.NullHandler())
