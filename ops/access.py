"""Who may read `/metrics`: a caller with the bearer token `METRICS_TOKEN`, or one whose address
is in `METRICS_ALLOWED_NETWORKS` (either suffices). With neither configured, nobody: the route
answers 404, as for any unknown path. A caller refused answers 403."""

from __future__ import annotations

import hmac
import ipaddress
from functools import cache

from django.conf import settings
from django.http import HttpRequest


def metrics_enabled() -> bool:
    return bool(settings.METRICS_TOKEN or settings.METRICS_ALLOWED_NETWORKS)


def metrics_allowed(request: HttpRequest) -> bool:
    """The token in `Authorization: Bearer …` (compared in constant time), or the address the
    connection comes from (`REMOTE_ADDR`: never a header a client can set; behind a proxy, list
    the proxy's network or use the token)."""
    token = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
        return True
    networks = _networks(tuple(settings.METRICS_ALLOWED_NETWORKS))
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in networks)


@cache
def _networks(
    specs: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(spec.strip(), strict=False) for spec in specs if spec.strip())
