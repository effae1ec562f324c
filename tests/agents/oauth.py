"""Real OAuth rows for tests that need a token without walking the browser flow: a registered
public client (authorization code + PKCE) and an access token issued to it, as django-oauth-toolkit
stores them. The flow itself is tested in tests/agents/test_oauth*.py and end to end."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, set_token_value

from accounts.models import User


def client_register(
    *, name: str = "test assistant", redirect_uri: str = "http://127.0.0.1/callback"
) -> Application:
    return Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri,
        algorithm="",
    )


def issue_token(
    user: User,
    *,
    scopes: str = "escrow:read escrow:refund_request",
    resource: str = "http://testserver/mcp",
    expires_in: int = 3600,
    application: Application | None = None,
) -> str:
    """A fresh access token (the raw string a client sends) for `user`, bound to `resource`."""
    raw = secrets.token_urlsafe(30)
    token = AccessToken(
        user=user,
        application=application or client_register(),
        scope=scopes,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=[resource] if resource else [],
    )
    set_token_value(token, raw)  # stored as the server stores it: a checksum only (RFC 9700)
    token.save()
    return raw
