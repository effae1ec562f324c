"""What Vouch's authorization server accepts, as plain functions of their inputs (SPEC §16): which
resource a token may be bound to (RFC 8707), which scopes a person may grant, which redirect URIs
a client may register. The views, the oauthlib validator and the admin ask here; nothing here
touches a request or the database."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings

from accounts.models import User
from agents.oauth.tokens import STAFF_SCOPES


def origin_of(*, scheme: str, host: str) -> str:
    """The origin a request came to (`http://127.0.0.1:8000`): the authorization server's
    issuer identifier and the base of its endpoints."""
    return f"{scheme}://{host}"


def scopes_described(scopes: Iterable[str]) -> list[tuple[str, str]]:
    """Each scope with what it lets the client do, in words (settings.AGENT_SCOPES), in the
    order of AGENT_SCOPES. A scope Vouch does not know is never described (oauthlib refuses it
    with invalid_scope before any page shows it)."""
    wanted = set(scopes)
    return [(scope, words) for scope, words in settings.AGENT_SCOPES.items() if scope in wanted]


def consent_refusal(*, user: User, scopes: Iterable[str]) -> str | None:
    """Why `user` may not grant `scopes`, or None. Staff scopes (ops:read) are for active staff
    only: a buyer's consent to them is refused, whatever else is asked."""
    staff_only = sorted(set(scopes) & STAFF_SCOPES)
    if staff_only and not (user.is_active and user.is_staff):
        names = ", ".join(staff_only)
        return (
            f"{names} is for Vouch staff only. Your account cannot grant it, so this "
            "request cannot be allowed; ask the application to request only the scopes "
            "a buyer may grant."
        )
    return None


def resource_refusal(*, requested: Iterable[str], expected: str) -> str | None:
    """Why the `resource` indicators of an authorization request are refused (the client is
    answered invalid_target), or None. The only resource Vouch issues tokens for is its MCP
    server, `expected` (agents.oauth.tokens.mcp_resource_url of the request's origin); a request
    that names none gets a token bound to it all the same."""
    if any(resource != expected for resource in requested):
        # The client's value is not echoed: the description travels in a redirect URL.
        return f"Vouch issues tokens only for its MCP server, resource {expected}."
    return None


def redirect_uri_refusal(uri: str) -> str | None:
    """Why a client may not register `uri` as a redirect URI, or None. Plain http is only for a
    loopback address on the person's own machine (RFC 8252 §7.3); anything else must be https.
    (django-oauth-toolkit checks the rest: absolute, no fragment, allowed scheme.)"""
    parts = urlsplit(uri)
    if parts.scheme != "http":
        return None
    host = parts.hostname or ""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return f"{uri} uses http on a host that is not a loopback address; use https."
