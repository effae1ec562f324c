"""The address of the client a request comes from, for the limits that count per address
(agents/oauth/limits.py): behind `TRUSTED_PROXY_COUNT` reverse proxies (the setting
ALLAUTH_TRUSTED_PROXY_COUNT, which allauth's login limits read the same way), the N-th address from
the right of X-Forwarded-For, the one the outermost trusted proxy saw; with no proxy (0), the
connection's address. Entries left of it are written by the client and never read: a forged
X-Forwarded-For moves nothing. A header with fewer entries than trusted proxies, or an entry that
is not an IP address, falls back to the connection's address (docs/decisions/0016-limits-by-
identity.md). The request log's `ip` and ops/access.py keep the connection's address."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest


def client_address(*, connection: str, forwarded_for: str) -> str:
    """The client's address from the connection's and the X-Forwarded-For header's value."""
    proxies = int(getattr(settings, "ALLAUTH_TRUSTED_PROXY_COUNT", 0) or 0)
    if proxies > 0 and forwarded_for:
        hops = [hop.strip() for hop in forwarded_for.split(",")]
        if len(hops) >= proxies:
            normal = _normal(hops[-proxies])
            if normal:
                return normal
    return _normal(connection) or connection


def request_client_address(request: HttpRequest) -> str:
    """`client_address` of a Django request."""
    return client_address(
        connection=str(request.META.get("REMOTE_ADDR", "") or ""),
        forwarded_for=str(request.META.get("HTTP_X_FORWARDED_FOR", "") or ""),
    )


def scope_client_address(scope: Mapping[str, Any]) -> str:
    """`client_address` of an ASGI HTTP scope (every X-Forwarded-For field, joined as one)."""
    client = scope.get("client")
    forwarded = b", ".join(
        value for name, value in scope.get("headers", ()) if name.lower() == b"x-forwarded-for"
    )
    return client_address(
        connection=str(client[0]) if client else "",
        forwarded_for=forwarded.decode("latin-1"),
    )


def _normal(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return ""
