"""What a request says about where a payment comes from: the connection's IP address and the
device (a long-lived first-party cookie, core.middleware_device). Funding sends them to the
provider as data elements for Visa Compelling Evidence 3.0 and they are kept in the charge's
signed receipt (SPEC §17; docs/decisions/0012-ce3-data-elements-in-receipts.md).

Only what the request itself shows is read: `REMOTE_ADDR` (never X-Forwarded-For, which a client
can set: config/settings/base.py, the request line's `ip`), and the device cookie as the client
sent it back. A request without the cookie (a bearer-token client, a browser's first request) has
no device; the device id is a digest of the cookie, never the cookie itself."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass

from django.http import HttpRequest
from rest_framework.request import Request

DEVICE_COOKIE = "vouch_device"
DEVICE_COOKIE_MAX_AGE_S = 2 * 365 * 24 * 3600
# The cookie's value as the middleware makes it (secrets.token_urlsafe(32): 43 characters); a
# value of another shape was not made by Vouch and names no device.
_DEVICE_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class FundingFacts:
    """The data elements of one funding request (None: the request did not show it)."""

    ip: str | None = None
    device: str | None = None


def device_token(request: HttpRequest | Request) -> str | None:
    """The device cookie the client sent, if it is one Vouch could have made."""
    token = request.COOKIES.get(DEVICE_COOKIE, "")
    return token if _DEVICE_TOKEN.fullmatch(token) else None


def device_id(token: str) -> str:
    """The device's id: the first 32 hex digits of the SHA-256 of its cookie."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()[:32]


def request_ip(request: HttpRequest | Request) -> str | None:
    """The connection's address (`REMOTE_ADDR`), in its normal spelling; None if it is none."""
    try:
        return str(ipaddress.ip_address(str(request.META.get("REMOTE_ADDR", ""))))
    except ValueError:
        return None


def request_facts(request: HttpRequest | Request) -> FundingFacts:
    token = device_token(request)
    return FundingFacts(
        ip=request_ip(request), device=device_id(token) if token is not None else None
    )
