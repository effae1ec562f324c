"""What staff do to the authorization server's tokens (SPEC §16: revocation in the admin)."""

from __future__ import annotations

from django.db import transaction
from oauth2_provider.models import AccessToken, RefreshToken, revoke_access_token

from accounts.models import User
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
