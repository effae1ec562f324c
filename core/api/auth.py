"""How a request's caller authenticated, as data: every authentication class of ours names its
method in an `auth_method` attribute ("session" or "bearer"; accounts.authentication), and code
that must refuse a bearer token where money moves reads it here. Here rather than in `accounts`
so that `core` (the ground floor) needs no app above it (docs/decisions/0008-import-floors.md)."""

from typing import Any

from rest_framework.request import Request


def auth_method_of(request: Request) -> str | None:
    """How the caller of `request` authenticated: "session", "bearer" or None (anonymous)."""
    authenticator: Any = request.successful_authenticator
    return getattr(authenticator, "auth_method", None)
