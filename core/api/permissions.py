from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from core import exceptions
from core.api.auth import auth_method_of


# docs/decisions/0005-no-bearer-token-moves-money.md
class SessionRequired(BasePermission):
    """Moving money to a card needs a logged-in session: a bearer token is refused (SPEC §5)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        if auth_method_of(request) != "session":
            raise exceptions.SessionRequired()
        return True


def django_permission(perm: str) -> type[BasePermission]:
    """A DRF permission that needs the Django permission `perm` on unsafe methods."""

    class HasDjangoPermission(BasePermission):
        def has_permission(self, request: Request, view: Any) -> bool:
            if request.method in ("GET", "HEAD", "OPTIONS"):
                return True
            if not request.user.has_perm(perm):
                # Named in `details` as every surface's refusal names it (disputes.permissions).
                raise exceptions.PermissionDenied(
                    f"This needs the permission {perm}.", details={"permission": perm}
                )
            return True

    return HasDjangoPermission


def caller(request: Request) -> Any:
    """The authenticated user of a request (views behind IsAuthenticated)."""
    user = request.user
    if user is None or not user.is_authenticated:
        raise exceptions.NotAuthenticated()
    return user
