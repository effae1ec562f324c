"""Who is calling /mcp: an OAuth access token issued by Vouch's authorization server
(django-oauth-toolkit), unexpired, bound to this resource (RFC 8707). Nothing else is accepted
there: a personal API token or a session cookie is no token of this server's."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from oauth2_provider.models import AccessToken, Application

from accounts.models import User
from core import db

MCP_PATH = "/mcp"
STAFF_SCOPES = frozenset({"ops:read"})


class TokenRefused(Exception):
    """The bearer token is missing, unknown, expired, revoked or for another resource: 401."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class AgentPrincipal:
    user: User
    token_id: int
    scopes: frozenset[str]
    client_id: str
    expires: datetime

    def allows(self, scope: str) -> bool:
        """Whether this token may act under `scope` now. Staff scopes also need the person to be
        active staff at the time of the call, not only at consent."""
        if scope not in self.scopes:
            return False
        if scope in STAFF_SCOPES:
            return bool(self.user.is_active and self.user.is_staff)
        return True


def mcp_resource_url(*, scheme: str, host: str) -> str:
    """The canonical URL of this server's MCP resource (RFC 8707, RFC 9728): MCP_RESOURCE_URL if
    set (behind a proxy that rewrites the host), else the origin the request came to + /mcp."""
    configured = getattr(settings, "MCP_RESOURCE_URL", "")
    if configured:
        return str(configured).rstrip("/")
    return f"{scheme}://{host}{MCP_PATH}"


def resource_metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of `resource` is (RFC 9728 §3.1: the well-known
    prefix inserted between the origin and the path)."""
    origin, _, path = resource.partition("://")[2].partition("/")
    scheme = resource.partition("://")[0]
    return f"{scheme}://{origin}/.well-known/oauth-protected-resource/{path}".rstrip("/")


def _token_of(checksum: str) -> AccessToken | None:
    """The access token with `checksum`, its user and application attached, in one round trip of
    plain SQL (core.db): the ORM's select_related over three tables was a third of an MCP read's
    CPU, building its SQL (issue 39 item 11, bench/mcp_vs_rest.py --profile)."""
    tokens = connection.ops.quote_name(AccessToken._meta.db_table)
    of_token = f"(SELECT {{}} FROM {tokens} WHERE token_checksum = %s)"  # noqa: S608
    rows = db.execute(
        [
            db.select(AccessToken, "token_checksum = %s", [checksum]),
            db.select(User, "id = " + of_token.format("user_id"), [checksum]),
            db.select(Application, "id = " + of_token.format("application_id"), [checksum]),
        ]
    )
    found = db.instances(AccessToken, rows[0])
    if not found:
        return None
    token = found[0]  # token_checksum is unique
    users = db.instances(User, rows[1])
    applications = db.instances(Application, rows[2])
    token.user = users[0] if users else None
    token.application = applications[0] if applications else None
    return token


def bearer_authenticate(*, raw: str, resource: str) -> AgentPrincipal:
    """The principal of an access token presented at `resource`, or TokenRefused."""
    if not raw:
        raise TokenRefused("missing")
    checksum = hashlib.sha256(raw.encode("utf-8")).hexdigest()
    token = _token_of(checksum)
    if token is None or token.user is None:
        raise TokenRefused("unknown")
    if token.is_expired():
        raise TokenRefused("expired")
    # A token with no resource indicator is bound to nothing: refused here (RFC 8707).
    if resource not in (token.resource or []):
        raise TokenRefused("wrong_resource")
    user = token.user
    if not user.is_active:
        raise TokenRefused("inactive_user")
    return AgentPrincipal(
        user=user,
        token_id=token.pk,
        scopes=frozenset(token.scope.split()),
        client_id=token.application.client_id if token.application else "",
        expires=token.expires,
    )
