import hashlib
import secrets
from datetime import timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.contrib.sites.models import Site
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import ApiToken, User
from core.services import audit_record

TOKEN_PREFIX = "vch_"  # noqa: S105 - a public marker, not a secret
# last_used_at is advisory: write it at most this often, not on every request.
_TOUCH_EVERY = timedelta(minutes=1)


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def api_token_issue(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    """Create a personal API token for `user`. Returns the row and the raw token, which exists
    nowhere else afterwards: only its digest is stored."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:12], digest=token_digest(raw))
    audit_record(
        actor=user,
        action="api_token.issue",
        target_type="api_token",
        target_id=str(token.pk),
        details={"name": name, "prefix": token.prefix},
    )
    return token, raw


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The live token matching `raw` with an active user, or None. Records when it was used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=token_digest(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


OPS_GROUP = "ops"
# Ops staff hold every permission of these apps: every page of the operations admin, and the
# staff actions (approve, file, resolve, debit, adjust) that four-eyes rules then constrain.
_OPS_APPS = (
    "core",
    "envelopes",
    "verification",
    "receipts",
    "disputes",
    "reconciliation",
    "django_celery_beat",
    "agents",
)
# And, of the accounts app, only what revoking a personal API token needs: never a user's or a
# group's permissions, so that ops cannot make anyone staff, superuser or a member of `ops`.
_OPS_ACCOUNTS_PERMISSIONS = ("view_apitoken", "change_apitoken")
# Of the OAuth server (django-oauth-toolkit): registering clients, and seeing and revoking (change)
# the tokens issued to them; no deleting rows, which would defeat refresh-token reuse protection.
_OPS_OAUTH_PERMISSIONS = (
    "add_application",
    "change_application",
    "view_application",
    "view_accesstoken",
    "change_accesstoken",
    "view_refreshtoken",
    "change_refreshtoken",
)


def ops_permissions() -> QuerySet[Permission]:
    """The permissions of the `ops` group."""
    return Permission.objects.filter(
        Q(content_type__app_label__in=_OPS_APPS)
        | Q(content_type__app_label="accounts", codename__in=_OPS_ACCOUNTS_PERMISSIONS)
        | Q(content_type__app_label="oauth2_provider", codename__in=_OPS_OAUTH_PERMISSIONS)
    )


@transaction.atomic
def email_address_verify(*, user: User, email: str | None = None) -> EmailAddress:
    """Record `email` (the user's own when omitted) as the user's verified, primary allauth
    address, which moving money needs (`accounts.selectors.user_email_verified`). For the demo
    users of a local run, tests and benchmarks; people verify by the link they are sent.
    Idempotent."""
    address = (email or user.email).strip()
    if not address:
        raise ValueError(f"User {user.get_username()!r} has no e-mail address to verify.")
    if user.email != address:
        user.email = address
        user.save(update_fields=["email"])
    EmailAddress.objects.filter(user=user, primary=True).exclude(email__iexact=address).update(
        primary=False
    )
    row = EmailAddress.objects.filter(user=user, email__iexact=address).first()
    if row is None:
        return EmailAddress.objects.create(user=user, email=address, verified=True, primary=True)
    if not (row.verified and row.primary):
        row.verified = row.primary = True
        row.save(update_fields=["verified", "primary"])
    return row


@transaction.atomic
def demo_users_ensure(*, users: dict[str, dict[str, object]]) -> list[User]:
    """Create the demo users of a local run, each with a verified e-mail address (so the demo
    buyer can move money at once), and the `ops` group with its permissions (`ops_permissions`);
    staff users join it. A password of None makes the password unusable (a session is then made
    without it). Idempotent, and a restart signs no one out: the password is set only when the
    user is new or it differs (Django ends a user's sessions when the stored hash changes, and
    setting even the same password again changes it, with a fresh salt)."""
    group, _ = Group.objects.get_or_create(name=OPS_GROUP)
    group.permissions.set(ops_permissions())
    result = []
    for username, spec in users.items():
        user, created = User.objects.get_or_create(username=username)
        user.email = str(spec["email"])
        user.is_staff = bool(spec["staff"])
        password = spec.get("password")
        if password is None:
            if created or user.has_usable_password():
                user.set_unusable_password()
        elif created or not user.check_password(str(password)):
            user.set_password(str(password))
        user.save()
        email_address_verify(user=user)
        if user.is_staff:
            user.groups.add(group)
        result.append(user)
    return result


def local_site_set(*, domain: str) -> Site:
    """The Site that allauth's e-mails speak for (SITE_ID), named SITE_NAME at `domain`: the
    address a local run serves at, set at each start (the port may change)."""
    site, _ = Site.objects.update_or_create(
        pk=settings.SITE_ID, defaults={"name": settings.SITE_NAME, "domain": domain}
    )
    Site.objects.clear_cache()
    return site


@transaction.atomic
def api_token_revoke(*, token: ApiToken, actor: User) -> ApiToken:
    """Revoke a token at once; a revoked token never authenticates again. Idempotent."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            action="api_token.revoke",
            target_type="api_token",
            target_id=str(token.pk),
            details={"user": token.user.get_username(), "prefix": token.prefix},
        )
    return token
