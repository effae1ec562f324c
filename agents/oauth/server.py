"""The oauthlib server behind /o/authorize/, /o/token/ and /o/revoke_token/: the authorization
code grant with PKCE S256 and the refresh token grant, nothing else (SPEC §16). oauthlib's stock
`Server` also serves the implicit, password, client-credentials and device grants and accepts
the `plain` PKCE method; this one is built without them, so a request for any of them is refused
by the protocol itself (unsupported_response_type, unsupported_grant_type, invalid_request)
before any application setting is consulted."""

from __future__ import annotations

from typing import Any

from oauthlib.oauth2 import (
    AuthorizationCodeGrant,
    AuthorizationEndpoint,
    BearerToken,
    RefreshTokenGrant,
    RevocationEndpoint,
    TokenEndpoint,
)
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256

PKCE_METHOD = "S256"


class S256AuthorizationCodeGrant(AuthorizationCodeGrant):
    """The authorization code grant, PKCE S256 only: a missing `code_challenge_method` (which
    RFC 7636 reads as `plain`) and `plain` itself are refused at the authorization endpoint with
    invalid_request, and a code stored with another method could never be redeemed."""

    _code_challenge_methods = {PKCE_METHOD: code_challenge_method_s256}

    def validate_authorization_request(self, request: Any) -> Any:
        try:
            return super().validate_authorization_request(request)
        except errors.UnsupportedCodeChallengeMethodError as exc:
            # oauthlib says "Transform algorithm not supported."; say what to send instead.
            sent = request.code_challenge_method
            raise errors.UnsupportedCodeChallengeMethodError(
                description=f"code_challenge_method must be {PKCE_METHOD}, not {sent}.",
                request=request,
            ) from exc


class VouchOAuthServer(AuthorizationEndpoint, TokenEndpoint, RevocationEndpoint):
    """Authorization code (PKCE S256) and refresh token grants, Bearer tokens, revocation."""

    def __init__(
        self,
        request_validator: Any,
        token_expires_in: Any = None,
        token_generator: Any = None,
        refresh_token_generator: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        # kwargs (django-oauth-toolkit's device-flow settings) belong to grants not served here.
        self.auth_grant = S256AuthorizationCodeGrant(request_validator)
        self.refresh_grant = RefreshTokenGrant(request_validator)
        self.bearer = BearerToken(
            request_validator, token_generator, token_expires_in, refresh_token_generator
        )
        AuthorizationEndpoint.__init__(
            self,
            default_response_type="code",
            response_types={"code": self.auth_grant},
            default_token_type=self.bearer,
        )
        TokenEndpoint.__init__(
            self,
            default_grant_type="authorization_code",
            grant_types={
                "authorization_code": self.auth_grant,
                "refresh_token": self.refresh_grant,
            },
            default_token_type=self.bearer,
        )
        RevocationEndpoint.__init__(self, request_validator)
