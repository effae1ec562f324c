"""django-oauth-toolkit's request validator, narrowed to what Vouch serves (SPEC §16): only
applications registered for the authorization code grant get codes or tokens, plain-http
redirect URIs only on loopback, and no code is ever stored for a person who may not grant its
scopes or without the MCP resource it is bound to. The views check the same first and say so on
the consent page; this is the floor a tampered form cannot get under."""

from __future__ import annotations

from typing import Any

from oauth2_provider.models import Application
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from agents.oauth.policy import consent_refusal, redirect_uri_refusal

GRANT_TYPES = ("authorization_code", "refresh_token")


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
        if redirect_uri_refusal(redirect_uri) is not None:
            return False
        return bool(
            super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
        )

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
