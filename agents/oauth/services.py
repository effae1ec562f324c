"""Revoking the authorization server's tokens (SPEC §16): staff in the admin, one token at a time;
a person on their connected-assistants page, everything one assistant holds for them."""

from __future__ import annotations

from django.db import transaction
from oauth2_provider.models import (
    AccessToken,
    Application,
    Grant,
    RefreshToken,
    revoke_access_token,
)

from accounts.models import User
from core.exceptions import NotFound
from core.services import audit_record


def _details(token: AccessToken | RefreshToken) -> dict[str, str]:
    return {
        "user": token.user.get_username() if token.user else "",
        "client_id": token.application.client_id if token.application else "",
        "resource": " ".join(token.resource or []),
    }


@transaction.atomic
def oauth_access_token_revoke(*, token: AccessToken, actor: User) -> None:
    """Revoke an access token at once, and the refresh token it came with, so that neither
    authenticates nor refreshes again (django-oauth-toolkit deletes the access token and keeps
    the refresh token as a revoked tombstone, which reuse protection needs). Audited."""
    details = {**_details(token), "scope": token.scope}
    token_id = token.pk
    revoke_access_token(token)
    audit_record(
        actor=actor,
        action="oauth_access_token.revoke",
        target_type="oauth_access_token",
        target_id=str(token_id),
        details=details,
    )


@transaction.atomic
def oauth_refresh_token_revoke(*, token: RefreshToken, actor: User) -> None:
    """Revoke a refresh token and the access token it last issued. Idempotent: a token already
    revoked is left as it is and nothing is recorded."""
    if token.revoked is not None:
        return
    token.revoke()
    audit_record(
        actor=actor,
        action="oauth_refresh_token.revoke",
        target_type="oauth_refresh_token",
        target_id=str(token.pk),
        details=_details(token),
    )


@transaction.atomic
def oauth_client_access_revoke(*, user: User, client_id: str) -> str:
    """A person revokes an assistant they authorized: every access and refresh token and every
    unused code that client holds for them ends at once (neither authenticates nor refreshes
    again). Only their own: a client that holds nothing of theirs is NotFound, as an unknown id.
    Audited. Returns the client's name."""
    application = Application.objects.filter(client_id=client_id).first()
    held = application is not None and (
        AccessToken.objects.filter(application=application, user=user).exists()
        or RefreshToken.objects.filter(
            application=application, user=user, revoked__isnull=True
        ).exists()
    )
    if not held or application is None:
        raise NotFound("No assistant of yours has that client id.")
    for refresh in RefreshToken.objects.filter(
        application=application, user=user, revoked__isnull=True
    ):
        refresh.revoke()
    for access in AccessToken.objects.filter(application=application, user=user):
        revoke_access_token(access)
    Grant.objects.filter(application=application, user=user).delete()
    audit_record(
        actor=user,
        action="oauth_client.revoke",
        target_type="oauth_client",
        target_id=client_id,
        details={"name": application.name},
    )
    return str(application.name)
