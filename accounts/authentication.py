"""DRF authentication: personal tokens (`Authorization: Bearer <token>`) and the allauth
session, with CSRF enforced on unsafe methods. Each class names its method, which the API
reports (`session` or `bearer`) and later issues use to refuse tokens where money moves."""

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.request import Request

from accounts.models import ApiToken, User
from accounts.services import api_token_authenticate
from core.exceptions import CsrfFailed


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


def auth_method_of(request: Request) -> str | None:
    """How the caller of `request` authenticated: "session", "bearer" or None (anonymous)."""
    authenticator: Any = request.successful_authenticator
    return getattr(authenticator, "auth_method", None)
