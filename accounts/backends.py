"""The authentication backend (settings AUTHENTICATION_BACKENDS, listed first)."""

from typing import Any

from allauth.account.auth_backends import AuthenticationBackend

from accounts.models import User
from accounts.selectors import user_with_email_verified, users_with_email_verified


class AccountBackend(AuthenticationBackend):
    """allauth's backend (a `ModelBackend`: username or e-mail and password, `is_active` checked
    by `user_can_authenticate`) whose `get_user`, which loads a session's user on every request,
    reads in the same SELECT whether the user has a verified address (an EXISTS subquery, kept
    as `accounts.selectors.EMAIL_VERIFIED_ATTR`): `EmailVerified` on the money routes then asks
    nothing more of the database (issue 15).

    Why allauth's backend and not Django's `ModelBackend`: a session names the backend that
    logged it in, and `django.contrib.auth.get_user` loads the user with that one only. Logins by
    e-mail are authenticated by allauth's backend, and allauth's own logins (after sign-up, after
    confirming an address) record the first backend that is an instance of allauth's; Django's
    `login()` without a backend (`force_login`) records the first one listed. Listed first, this
    class is all three, so every new session loads through it. The sessions made before it name
    `django.contrib.auth.backends.ModelBackend` or allauth's backend: both stay listed after it,
    so that those sessions still load (their users without the annotation: the selector then
    queries, as before), and can be dropped once such sessions have expired
    (SESSION_COOKIE_AGE)."""

    def get_user(self, user_id: Any) -> User | None:
        user = user_with_email_verified(pk=user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    async def aget_user(self, user_id: Any) -> User | None:
        try:
            user = await users_with_email_verified().aget(pk=user_id)
        except User.DoesNotExist:
            return None
        return user if self.user_can_authenticate(user) else None
