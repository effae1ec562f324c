"""Failed credentials and registrations counted per identity, not only per address (SPEC §16,
§19; docs/decisions/0016-limits-by-identity.md): token requests at /o/token/ that fail
(OAUTH_TOKEN_FAILURE_RATE), bearer tokens refused at /mcp (MCP_BEARER_FAILURE_RATE) and client
registrations (MCP_REGISTRATION_RATE, every one counted). Each `"<n>/<s|min|hour|day>"`, empty:
none. Counted in the shared cache as every other limit of Vouch (core.api.throttling).

Who is counted (a `Caller`): the client's address (core.client_address: behind a proxy, from
X-Forwarded-For as TRUSTED_PROXY_COUNT says), the client id it names, and the fingerprint of the
credential it presents (the SHA-256 of the token or code, never the token). A failure counts in
each of them; the client id's bucket is CLIENT_FACTOR times larger, since one client id (claude.ai,
ChatGPT) is every user of that host.

How they refuse, so that one identity's failures never refuse another's valid credential:
- before a credential is checked, only its own fingerprint is consulted (that very credential
  failed n times: no lookup for it); a request presenting none (noise) consults its address;
- a credential that fails while any of its buckets is over its limit is answered 429 (wait)
  instead of its error: whoever keeps failing is slowed, and a valid credential, from whatever
  address or client, goes through. Tokens and codes are random (160 bits and more): the limit
  stops noise and tells a broken client to back off, it is not what makes them unguessable."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest

from core.api.throttling import parse_rate, window_count, window_counts
from core.client_address import request_client_address

TOKEN_FAILURES = "oauth_token_failure"  # noqa: S105 (a counter's name)
BEARER_FAILURES = "mcp_bearer_failure"
REGISTRATIONS = "oauth_registration"
_RATES = {
    TOKEN_FAILURES: "OAUTH_TOKEN_FAILURE_RATE",
    BEARER_FAILURES: "MCP_BEARER_FAILURE_RATE",
    REGISTRATIONS: "MCP_REGISTRATION_RATE",
}
# A client id's bucket (and, for registrations, an address's) holds this many times the rate: one
# host's id, or a gateway's address, stands for many people.
CLIENT_FACTOR = 10


@dataclass(frozen=True)
class Caller:
    """Who a request is counted as: its client's address, the client id it names ("" if none),
    the fingerprint of the credential it presents ("" if none)."""

    address: str
    client: str = ""
    fingerprint: str = ""


def fingerprint(secret: str) -> str:
    """The SHA-256 (hex) of a credential: what is counted, never the credential."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def token_caller(request: HttpRequest) -> Caller:
    """The caller of a token request: its client's address, the client id of the form or of HTTP
    Basic, the fingerprint of the refresh token or code. A form that cannot be read names no
    client and no credential (its refusal is counted against the address)."""
    address = request_client_address(request)
    try:
        form = request.POST
        client = form.get("client_id", "") or _basic_client_id(request)
        credential = form.get("refresh_token", "") or form.get("code", "")
    except (RequestDataTooBig, TooManyFieldsSent):
        return Caller(address=address)
    return Caller(
        address=address,
        client=client,
        fingerprint=fingerprint(credential) if credential else "",
    )


def bearer_caller(*, address: str, raw: str | None) -> Caller:
    """The caller at /mcp: its client's address and the fingerprint of the bearer token (a token
    that is not ours names no client)."""
    return Caller(address=address, fingerprint=fingerprint(raw) if raw else "")


def registration_caller(request: HttpRequest) -> Caller:
    """The caller of a registration: its client's address, and as its client the fingerprint of
    what names the client in its metadata (client_name, software_id, redirect_uris); a body that
    is not JSON names none."""
    address = request_client_address(request)
    try:
        body = json.loads(request.body or b"null")
    except (RequestDataTooBig, ValueError, RecursionError):
        return Caller(address=address)
    if not isinstance(body, dict):
        return Caller(address=address)
    names = {key: body.get(key) for key in ("client_name", "software_id", "redirect_uris")}
    return Caller(address=address, client=json.dumps(names, sort_keys=True, default=str))


def failures_wait(*, scope: str, caller: Caller) -> int | None:
    """Before the credential is checked: the whole seconds (at least 1) to wait if the
    credential presented has failed its limit, or, for a request presenting none, if its
    address has; else None. Counts nothing."""
    rate = _rate(scope)
    ident = caller.fingerprint or caller.address
    if not rate or not ident:
        return None
    bucket = f"{scope}:credential" if caller.fingerprint else scope
    # Refused once the window holds n failures: a peek (count 0) against n - 1 in the same window.
    allowed, _ = parse_rate(rate)
    peek = f"{allowed - 1}/{rate.split('/')[1]}"
    return _seconds(window_count(scope=bucket, ident=ident, rate=peek, count=0))


def failure_count(*, scope: str, caller: Caller) -> int | None:
    """Count one failure of the caller in each of its buckets (address, client id, credential):
    the whole seconds to wait if any is now over its limit (the failure is then answered 429),
    else None."""
    return _count(_buckets(scope, caller, client_factor=CLIENT_FACTOR))


def registrations_wait(*, caller: Caller) -> int | None:
    """Count one registration (RFC 7591, MCP_REGISTRATION_RATE) of the client its metadata names
    from its address, and one of the address in a bucket CLIENT_FACTOR times larger (a gateway
    registers for many): None if within both, else the whole seconds to wait. Refused attempts
    count too."""
    rate = _rate(REGISTRATIONS)
    if not rate or not caller.address:
        return None
    allowed, period = _split(rate)
    buckets = [(REGISTRATIONS, caller.address, f"{allowed * CLIENT_FACTOR}/{period}")]
    client = _digest(caller.client) if caller.client else "unnamed"
    buckets.append((f"{REGISTRATIONS}:client", f"{caller.address}:{client}", rate))
    return _count(buckets)


def _buckets(scope: str, caller: Caller, *, client_factor: int) -> list[tuple[str, Any, str]]:
    rate = _rate(scope)
    if not rate:
        return []
    allowed, period = _split(rate)
    buckets: list[tuple[str, Any, str]] = []
    if caller.address:
        buckets.append((scope, caller.address, rate))
    if caller.client:
        # A client id may be a URL (a metadata document's): its digest keeps the key short.
        buckets.append(
            (f"{scope}:client", _digest(caller.client), f"{allowed * client_factor}/{period}")
        )
    if caller.fingerprint:
        buckets.append((f"{scope}:credential", caller.fingerprint, rate))
    return buckets


def _count(buckets: list[tuple[str, Any, str]]) -> int | None:
    if not buckets:
        return None
    waits = [wait for wait in window_counts(buckets, count=1) if wait is not None]
    return _seconds(max(waits)) if waits else None


def _rate(scope: str) -> str:
    return str(getattr(settings, _RATES[scope], "") or "")


def _split(rate: str) -> tuple[int, str]:
    allowed, _ = parse_rate(rate)
    return allowed, rate.split("/")[1]


def _digest(value: str) -> str:
    return fingerprint(value)[:32]


def _seconds(wait: float | None) -> int | None:
    return None if wait is None else max(1, math.ceil(wait))


def _basic_client_id(request: HttpRequest) -> str:
    scheme, _, encoded = str(request.META.get("HTTP_AUTHORIZATION", "")).partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[0]
