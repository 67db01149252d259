"""Bearer-token auth: loopback binds need none, any other bind requires a token."""

from __future__ import annotations

import hmac
import ipaddress
import secrets

__all__ = ["generate_token", "is_loopback", "token_matches"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def generate_token() -> str:
    """A fresh random token (URL-safe)."""
    return secrets.token_urlsafe(24)


def token_matches(expected: str, authorization: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <expected>`` (constant-time compare)."""
    if not authorization:
        return False
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), expected.encode())
