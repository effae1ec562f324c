"""What Vouch's authorization server accepts, as plain functions of their inputs (SPEC §16): which
resource a token may be bound to (RFC 8707), which scopes a person may grant, which redirect URIs
a client may register. The views, the oauthlib validator and the admin ask here; nothing here
touches a request or the database."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings
from oauth2_provider.models import check_redirect_to_uri_allowed

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


def scopes_grantable(*, user: User, scopes: Iterable[str]) -> tuple[list[str], list[str]]:
    """The scopes asked for that `user` may grant, and those they may not (staff scopes, for
    anyone who is not active staff), each in the order asked. A client asking for more than the
    person holds (a generic MCP host asks for every scope the metadata lists) is granted the
    subset they hold; the token response's `scope` says which."""
    asked = list(dict.fromkeys(scopes))
    staff = bool(user.is_active and user.is_staff)
    granted = [scope for scope in asked if staff or scope not in STAFF_SCOPES]
    return granted, [scope for scope in asked if scope not in granted]


def consent_refusal(*, user: User, scopes: Iterable[str]) -> str | None:
    """Why `user` may not grant every one of `scopes`, or None. Staff scopes (ops:read) are for
    active staff only. The consent page offers only what `scopes_grantable` keeps, and says this
    when nothing is left; the validator refuses with it a form that came back asking for more."""
    staff_only = sorted(set(scopes) & STAFF_SCOPES)
    if staff_only and not (user.is_active and user.is_staff):
        names = ", ".join(staff_only)
        return (
            f"{names} is for Vouch staff only. Your account cannot grant it, and the "
            "application asked for nothing else; ask it to request the scopes a buyer may grant "
            "(escrow:read, escrow:refund_request)."
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


def _port_well_formed(netloc: str) -> bool:
    """No port, or 1 to 65535 in ASCII digits. urlsplit's `port` alone is not enough: it takes
    int()'s view, so "+80", " 80" and Arabic-Indic digits pass, and ":0" is in its range."""
    host = netloc.rpartition("@")[2]
    after = host.rpartition("]")[2] if host.startswith("[") else host
    if ":" not in after:
        return True
    port = after.rpartition(":")[2]
    return port.isascii() and port.isdigit() and 1 <= int(port) <= 65535


def redirect_uri_malformed(uri: str) -> str | None:
    """Why `uri` cannot be read as a URI at all (a bracketed host that is no IPv6 address, a port
    that is not 1 to 65535 in digits), or None. Such a URI is broken, not merely unserved: a
    registration naming it is refused whole (issue 38), never trimmed."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises ValueError for a port out of range or not a number)
    except ValueError:
        return f"{uri} is not a well-formed URI: its host or port cannot be read."
    if not _port_well_formed(parts.netloc):
        return f"{uri} has a port that is not a number from 1 to 65535."
    return None


def _loopback_http(uri: str) -> bool:
    """Plain http on a loopback host of the person's own machine (RFC 8252 §7.3), `localhost`
    included: real hosts (Claude Code, Cursor) register it."""
    parts = urlsplit(uri)
    if parts.scheme != "http":
        return False
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_refusal(uri: str) -> str | None:
    """Why a client may not register (or be sent to) `uri` as a redirect URI, or None. It must be
    well formed (redirect_uri_malformed): a URI urlsplit cannot read is refused here, so nothing
    downstream meets its ValueError. Plain http is only for a loopback address on the person's
    own machine (RFC 8252 §7.3); anything else must be https. (django-oauth-toolkit checks the
    rest: absolute, no fragment, allowed scheme.)"""
    malformed = redirect_uri_malformed(uri)
    if malformed is not None:
        return malformed
    if urlsplit(uri).scheme != "http" or _loopback_http(uri):
        return None
    return f"{uri} uses http on a host that is not a loopback address; use https."


def redirect_uri_served(uri: str) -> bool:
    """Whether Vouch sends codes to `uri` (well formed): https, or http on a loopback host.
    Anything else a client lists (a private-use scheme such as cursor://, http elsewhere) is
    left out of its registration rather than refusing the client (SPEC §19)."""
    return urlsplit(uri).scheme == "https" or _loopback_http(uri)


def _loopback_port_free(uri: str, registered: str) -> str | None:
    """`uri` with the port of `registered` when both are http on the same loopback host, so the
    exact comparison that follows ignores the port only (RFC 8252 §7.3: the port is picked when
    the client runs). django-oauth-toolkit frees it for 127.0.0.1 and ::1 but not localhost."""
    if "@" in uri or not (_loopback_http(uri) and _loopback_http(registered)):
        return None
    asked, allowed = urlsplit(uri), urlsplit(registered)
    if "@" in allowed.netloc or asked.hostname != allowed.hostname:
        return None
    # Spliced into the raw string, not rebuilt by urlunsplit, which drops an empty "?" or "#".
    start = uri.index("//") + 2
    return uri[:start] + allowed.netloc + uri[start + len(asked.netloc) :]


def redirect_uri_registered(uri: str, registered: Iterable[str]) -> bool:
    """Whether a client that registered `registered` may be sent to `uri`: django-oauth-toolkit's
    exact match (RFC 9700 §2.1), except that a loopback http URI (127.0.0.1, [::1], localhost)
    matches on any port; scheme, host, path and query still match exactly."""
    if redirect_uri_malformed(uri) is not None:
        return False
    for allowed in registered:
        if redirect_uri_malformed(allowed) is not None:
            continue
        candidate = _loopback_port_free(uri, allowed) or uri
        if check_redirect_to_uri_allowed(candidate, [allowed])[0]:
            return True
    return False
