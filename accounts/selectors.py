"""Reads about accounts."""

from allauth.account.models import EmailAddress
from django.db.models import Exists, OuterRef, QuerySet

from accounts.models import User

# Set on the user a session loads (accounts.backends.AccountBackend): whether the user had a
# verified address when the request began, read in the same query as the user.
EMAIL_VERIFIED_ATTR = "_vouch_email_verified"


def users_with_email_verified() -> QuerySet[User]:
    """Users, each annotated (`EMAIL_VERIFIED_ATTR`) with whether one of their addresses is
    verified: an EXISTS subquery, no second query."""
    verified = EmailAddress.objects.filter(user=OuterRef("pk"), verified=True)
    return User._default_manager.annotate(**{EMAIL_VERIFIED_ATTR: Exists(verified)})


def user_email_verified(*, user: User) -> bool:
    """Whether the user has confirmed an e-mail address (allauth's `EmailAddress.verified`):
    moving money needs it (accounts.api.permissions.EmailVerified). For a user loaded by
    `users_with_email_verified` (a session's), the answer read with the user at the start of the
    request, without a query; else read now."""
    known = getattr(user, EMAIL_VERIFIED_ATTR, None)
    if known is not None:
        return bool(known)
    return EmailAddress.objects.filter(user=user, verified=True).exists()
