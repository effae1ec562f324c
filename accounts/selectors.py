"""Reads about accounts."""

from typing import Any

from allauth.account.models import EmailAddress
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from accounts.models import User
from core import db

# Set on the user a session loads (accounts.backends.AccountBackend): whether the user had a
# verified address when the request began, read in the same query as the user.
EMAIL_VERIFIED_ATTR = "_vouch_email_verified"


def users_with_email_verified() -> QuerySet[User]:
    """Users, each annotated (`EMAIL_VERIFIED_ATTR`) with whether one of their addresses is
    verified: an EXISTS subquery, no second query."""
    verified = EmailAddress.objects.filter(user=OuterRef("pk"), verified=True)
    return User._default_manager.annotate(**{EMAIL_VERIFIED_ATTR: Exists(verified)})


def user_with_email_verified(*, pk: Any) -> User | None:
    """The user `pk` (None if there is none), annotated as by `users_with_email_verified`: what a
    session loads on every request, so in plain SQL (core.db), where the ORM spent more CPU
    building this query than PostgreSQL spent running it (issue 15)."""
    try:
        pk = User._meta.pk.to_python(pk)
    except ValidationError:
        return None
    table = connection.ops.quote_name(User._meta.db_table)
    emails = connection.ops.quote_name(EmailAddress._meta.db_table)
    verified = (
        f"EXISTS (SELECT 1 FROM {emails} WHERE {emails}.user_id = {table}.id "  # noqa: S608
        f"AND {emails}.verified)"
    )
    rows = db.execute([db.select(User, f"{table}.id = %s", [pk], also=verified)])[0]
    if not rows:
        return None
    (user,) = db.instances(User, rows)
    setattr(user, EMAIL_VERIFIED_ATTR, bool(rows[0][-1]))
    return user


def user_email_verified(*, user: User) -> bool:
    """Whether the user has confirmed an e-mail address (allauth's `EmailAddress.verified`):
    moving money needs it (accounts.api.permissions.EmailVerified). For a user loaded by
    `users_with_email_verified` (a session's), the answer read with the user at the start of the
    request, without a query; else read now."""
    known = getattr(user, EMAIL_VERIFIED_ATTR, None)
    if known is not None:
        return bool(known)
    return EmailAddress.objects.filter(user=user, verified=True).exists()
