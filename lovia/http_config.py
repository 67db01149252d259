"""The outbound HTTP settings every provider shares: timeout, proxy trust and TLS verification.

Explicit constructor arguments win; otherwise the environment decides:

- ``LOVIA_PROVIDER_TIMEOUT``: request timeout in seconds (default :data:`DEFAULT_TIMEOUT`).
- ``LOVIA_PROVIDER_TRUST_ENV``: honour ``HTTP(S)_PROXY`` / ``NO_PROXY`` (off unless truthy).
- ``LOVIA_HTTP_INSECURE``: turn certificate verification off.
- ``LOVIA_HTTP_CA_BUNDLE``: a PEM bundle to verify against instead of the default trust store.
"""

from __future__ import annotations

from .providers._http import DEFAULT_TIMEOUT, resolve_trust_env, resolve_verify
from .providers._http import resolve_timeout as _resolve_httpx_timeout

__all__ = ["DEFAULT_TIMEOUT", "resolve_timeout", "resolve_trust_env", "resolve_verify"]


def resolve_timeout(timeout: float | None) -> float:
    """The request timeout in seconds: ``timeout``, else ``LOVIA_PROVIDER_TIMEOUT``, else the default.

    A ``LOVIA_PROVIDER_TIMEOUT`` that is not a number, or is not above zero, is ignored (the
    default applies).
    """
    read = _resolve_httpx_timeout(timeout).read
    return float(read if read is not None else DEFAULT_TIMEOUT)
