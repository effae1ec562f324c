"""django-oauth-toolkit's request validator, narrowed to what Vouch serves (SPEC §16): only
applications registered for the authorization code grant get codes or tokens, plain-http
redirect URIs only on loopback, and no code is ever stored for a person who may not grant its
scopes or without the MCP resource it is bound to. The views check the same first and say so on
the consent page; this is the floor a tampered form cannot get under."""

from __future__ import annotations

import hashlib
from typing import Any

from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from agents.models import RedeemedCode
from agents.oauth.policy import consent_refusal, redirect_uri_refusal, redirect_uri_registered
from agents.oauth.registration import client_used

GRANT_TYPES = ("authorization_code", "refresh_token")


def _checksum(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _code_client(client: Any) -> bool:
    return bool(
        client is not None
        and client.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    )


class VouchOAuth2Validator(OAuth2Validator):
    def validate_response_type(
        self,
        client_id: str,
        response_type: str,
        client: Any,
        request: Any,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        return response_type == "code" and _code_client(client)

    def validate_grant_type(
        self, client_id: str, grant_type: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        # An application registered for another grant (client credentials, password, ...) cannot
        # even refresh: it never had a code to begin with.
        return grant_type in GRANT_TYPES and _code_client(client)

    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        # Not django-oauth-toolkit's match: it frees the port of 127.0.0.1 and ::1 only, and
        # Claude Code registers localhost and listens on another port (RFC 8252 §7.3).
        if redirect_uri_refusal(redirect_uri) is not None:
            return False
        return redirect_uri_registered(redirect_uri, request.client.redirect_uris.split())

    def save_authorization_code(
        self, client_id: str, code: dict[str, str], request: Any, *args: Any, **kwargs: Any
    ) -> None:
        refusal = consent_refusal(user=request.user, scopes=request.scopes or [])
        if refusal is not None:
            raise errors.AccessDeniedError(description=refusal, request=request)
        if not getattr(request, "resource", None):
            raise errors.CustomOAuth2Error(
                error="invalid_target",
                description="A code is issued only for Vouch's MCP resource.",
                request=request,
            )
        super().save_authorization_code(client_id, code, request, *args, **kwargs)

    # --- a code is exchanged once; presented again, what it issued is revoked ------------------

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        redeemed = RedeemedCode.objects.filter(
            code_checksum=_checksum(code), application=client
        ).first()
        if redeemed is not None:
            _revoke_what_it_issued(redeemed)
        return False

    def confirm_redirect_uri(
        self,
        client_id: str,
        code: str,
        redirect_uri: str,
        client: Any,
        request: Any,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        """RFC 6749 §4.1.3: the exchange names the redirect URI the authorization request named
        (oauthlib would otherwise fill in the client's default and compare that)."""
        if getattr(request, "using_default_redirect_uri", False):
            named = Grant.objects.filter(code=code, application=client).values_list(
                "redirect_uri", flat=True
            )
            if any(named):
                raise errors.InvalidRequestError(
                    description="redirect_uri is required: the authorization request named one.",
                    request=request,
                )
        return bool(
            super().confirm_redirect_uri(
                client_id, code, redirect_uri, client, request, *args, **kwargs
            )
        )

    def _create_access_token(
        self, expires: Any, request: Any, token: Any, source_refresh_token: Any = None
    ) -> AccessToken:
        access_token: AccessToken = super()._create_access_token(
            expires, request, token, source_refresh_token
        )
        request.vouch_issued_access = access_token
        return access_token

    def invalidate_authorization_code(
        self, client_id: str, code: str, request: Any, *args: Any, **kwargs: Any
    ) -> None:
        super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        client_used(request.client)
        access = getattr(request, "vouch_issued_access", None)
        refresh = (
            RefreshToken.objects.filter(access_token=access).first() if access is not None else None
        )
        RedeemedCode.objects.create(
            code_checksum=_checksum(code),
            application=request.client,
            token_family=refresh.token_family if refresh is not None else None,
            access_token_checksum=access.token_checksum if access is not None else "",
        )


def _revoke_what_it_issued(redeemed: RedeemedCode) -> None:
    """Every token the code's exchange issued, and every one refreshed from them since."""
    if redeemed.token_family is not None:
        for refresh in RefreshToken.objects.filter(
            token_family=redeemed.token_family, revoked__isnull=True
        ):
            refresh.revoke()
    if redeemed.access_token_checksum:
        AccessToken.objects.filter(token_checksum=redeemed.access_token_checksum).delete()
    if redeemed.replayed_at is None:
        redeemed.replayed_at = timezone.now()
        redeemed.save(update_fields=["replayed_at"])
