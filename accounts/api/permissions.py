from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.exceptions import EmailUnverified
from accounts.models import User
from accounts.selectors import user_email_verified


class EmailVerified(BasePermission):
    """Moving money needs a confirmed e-mail address; reading does not. A permission, so DRF
    checks it after authentication, the method and the session requirement (listed before it)
    and before the view looks anything up: the answer is the same whether an id exists or not,
    and nothing is stored under the request's Idempotency-Key."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        if not hasattr(view, (request.method or "").lower()):
            return True  # the view answers 405 (the method is checked first)
        user = request.user
        if not isinstance(user, User) or not user_email_verified(user=user):
            raise EmailUnverified()
        return True
