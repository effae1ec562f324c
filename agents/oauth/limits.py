"""Failed credentials counted per client address (SPEC §16): token requests at /o/token/ that fail
(OAUTH_TOKEN_FAILURE_RATE) and bearer tokens refused at /mcp (MCP_BEARER_FAILURE_RATE); and
client registrations (MCP_REGISTRATION_RATE, every one counted). Each
`"<n>/<s|min|hour|day>"`, empty: none. Over the limit, every request from that address waits for
the window's end, a good one too: guessing must not go on beside it. Counted in the shared cache
as every other limit of Vouch (core.api.throttling.window_count); the address is the connection's
(REMOTE_ADDR, as the request log reads it), never a header a client can write."""

from __future__ import annotations

import math

from django.conf import settings

from core.api.throttling import parse_rate, window_count

TOKEN_FAILURES = "oauth_token_failure"  # noqa: S105 (a counter's name)
BEARER_FAILURES = "mcp_bearer_failure"
REGISTRATIONS = "oauth_registration"
_RATES = {
    TOKEN_FAILURES: "OAUTH_TOKEN_FAILURE_RATE",
    BEARER_FAILURES: "MCP_BEARER_FAILURE_RATE",
    REGISTRATIONS: "MCP_REGISTRATION_RATE",
}


def _rate(scope: str) -> str:
    return str(getattr(settings, _RATES[scope], "") or "")


def failures_wait(*, scope: str, address: str) -> int | None:
    """None while the address is within its limit of failures, else the whole seconds (at least
    1) to the window's end. Counts nothing."""
    rate = _rate(scope)
    if not rate or not address:
        return None
    # Refused once the window holds n failures: a peek (count 0) against n - 1 in the same window.
    allowed, _ = parse_rate(rate)
    peek = f"{allowed - 1}/{rate.split('/')[1]}"
    wait = window_count(scope=scope, ident=address, rate=peek, count=0)
    return None if wait is None else max(1, math.ceil(wait))


def failure_count(*, scope: str, address: str) -> None:
    """Count one failure of the address."""
    rate = _rate(scope)
    if rate and address:
        window_count(scope=scope, ident=address, rate=rate, count=1)


def registrations_wait(*, address: str) -> int | None:
    """Count one client registration of the address (RFC 7591, MCP_REGISTRATION_RATE): None if
    within its limit, else the whole seconds to wait. Refused attempts count too."""
    rate = _rate(REGISTRATIONS)
    if not rate or not address:
        return None
    wait = window_count(scope=REGISTRATIONS, ident=address, rate=rate, count=1)
    return None if wait is None else max(1, math.ceil(wait))
