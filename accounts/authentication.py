"""DRF authentication: personal tokens (`Authorization: Bearer <token>`) and the allauth
session, with CSRF enforced on unsafe methods. Each class names its method, which the API
reports (`session` or `bearer`) and later issues use to refuse tokens where money moves.
An OAuth access token of Vouch's MCP server is no credential here (SPEC §16): it is refused
with a 401 that says where it belongs."""

import hashlib

from oauth2_provider.models import AccessToken
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.request import Request

from accounts.models import ApiToken, User
from accounts.services import api_token_authenticate
from core import exceptions as core_errors
from core.api.auth import auth_method_of
from core.exceptions import CsrfFailed

__all__ = ["BearerTokenAuthentication", "CsrfSessionAuthentication", "auth_method_of"]


class OAuthTokenRefused(core_errors.AuthenticationFailed, exceptions.AuthenticationFailed):
    """401 `authentication_failed` (the code every operation documents for a bad credential),
    with a message and `details.reason` saying it is an OAuth token, which only /mcp takes.
    Also DRF's AuthenticationFailed, so the 401 carries the WWW-Authenticate challenge."""

    default_message = (
        "This is an OAuth access token for Vouch's MCP server: send it to /mcp. The REST API "
        "takes a personal API token or a logged-in session."
    )

    def __init__(self) -> None:
        super().__init__(details={"reason": "oauth_access_token"})


def _is_oauth_access_token(raw: str) -> bool:
    """Whether `raw` is (or was, expired or not) an access token of Vouch's authorization
    server. django-oauth-toolkit keeps only its SHA-256 checksum (RFC 9700 storage)."""
    checksum = hashlib.sha256(raw.encode("utf-8")).hexdigest()
    return AccessToken.objects.filter(token_checksum=checksum).exists()


class BearerTokenAuthentication(BaseAuthentication):
    auth_method = "bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send exactly: Authorization: Bearer <token>.")
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("The token is not valid.") from exc
        token = api_token_authenticate(raw=raw)
        if token is None:
            # OAuth tokens are for /mcp only (docs/decisions/0005-no-bearer-token-moves-money.md).
            if _is_oauth_access_token(raw):
                raise OAuthTokenRefused()
            raise exceptions.AuthenticationFailed("The token is not valid.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="vouch"'


class CsrfSessionAuthentication(SessionAuthentication):
    auth_method = "session"

    def enforce_csrf(self, request: Request) -> None:
        try:
            super().enforce_csrf(request)
        except exceptions.PermissionDenied as exc:
            raise CsrfFailed() from exc
