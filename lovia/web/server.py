"""``serve``: run the web app under uvicorn (single worker), with a graceful shutdown that keeps checkpoints.

The implementation lives in :mod:`lovia.web.app` (``lovia.web.app.serve``) and
:mod:`lovia.web.serving`; this module keeps the older import paths working.
"""

from __future__ import annotations

from .app import serve
from .serving import log_run_failures as _log_run_failures
from .serving import normalize_root_path
from .serving import server_class as _server_class

__all__ = ["_log_run_failures", "_server_class", "normalize_root_path", "serve"]
