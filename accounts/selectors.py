"""Reads about accounts."""

from allauth.account.models import EmailAddress

from accounts.models import User


def user_email_verified(*, user: User) -> bool:
    """Whether the user has confirmed an e-mail address (allauth's `EmailAddress.verified`):
    moving money needs it (accounts.api.permissions.EmailVerified)."""
    return EmailAddress.objects.filter(user=user, verified=True).exists()
