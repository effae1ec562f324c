import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import Group, Permission
from django.db import transaction
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
# Ops staff hold every permission of these apps (later issues add their models' permissions).
_OPS_APPS = (
    "core",
    "envelopes",
    "verification",
    "disputes",
    "reconciliation",
    "django_celery_beat",
)


@transaction.atomic
def demo_users_ensure(*, users: dict[str, dict[str, object]]) -> list[User]:
    """Create (or reset the password of) the demo users of a local run, and the ops group with
    every Vouch permission. Idempotent."""
    group, _ = Group.objects.get_or_create(name=OPS_GROUP)
    group.permissions.set(Permission.objects.filter(content_type__app_label__in=_OPS_APPS))
    result = []
    for username, spec in users.items():
        user, _ = User.objects.get_or_create(username=username)
        user.email = str(spec["email"])
        user.is_staff = bool(spec["staff"])
        user.set_password(str(spec["password"]))
        user.save()
        if user.is_staff:
            user.groups.add(group)
        result.append(user)
    return result


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
