"""Clients that register themselves (SPEC §16): RFC 7591 dynamic registration, for public clients
only, which is what the official MCP SDK, the MCP Inspector and other hosts do when nobody handed
them a client id. What a client says about itself is checked here and nothing else is trusted:
it gets the authorization code grant with PKCE S256 (refresh with it), no secret, and only
redirect URIs a person's own machine (loopback http) or an https site can receive. Its consent
page marks it unverified, and a client nobody used for MCP_DYNAMIC_CLIENT_UNUSED_DAYS is removed.

Errors are RFC 7591 §3.2.2's: `invalid_redirect_uri` or `invalid_client_metadata`, each with a
description that says what to send instead."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from agents.models import RegisteredClient
from agents.oauth.policy import redirect_uri_refusal

GRANT_TYPES = ("authorization_code", "refresh_token")
NAME_MAX = 255
REDIRECT_URIS_MAX = 10
UNNAMED = "An unnamed client"


class RegistrationRefused(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _metadata_refused(description: str) -> RegistrationRefused:
    return RegistrationRefused("invalid_client_metadata", description)


def _redirect_refused(description: str) -> RegistrationRefused:
    return RegistrationRefused("invalid_redirect_uri", description)


def storable(value: str) -> bool:
    """Whether PostgreSQL can hold `value`: no NUL, and no lone surrogate (JSON may escape one as
    "\\ud800"; UTF-8 cannot encode it, and the database refused it with a 500)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _metadata_refused(f"{name} must be a string.")
    if not storable(value):
        raise _metadata_refused(
            f"{name} must be valid Unicode text without a NUL character or a lone surrogate."
        )
    if len(value) > NAME_MAX:
        raise _metadata_refused(f"{name} is longer than {NAME_MAX} characters.")
    return value


def _redirect_uris(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _redirect_refused("redirect_uris must be a non-empty list of absolute URIs.")
    if len(value) > REDIRECT_URIS_MAX:
        raise _redirect_refused(f"At most {REDIRECT_URIS_MAX} redirect_uris.")
    uris: list[str] = []
    for uri in value:
        if (
            not isinstance(uri, str)
            or not uri
            or not storable(uri)
            or any(c.isspace() for c in uri)
        ):
            raise _redirect_refused(
                "Each redirect URI must be a URI without spaces, NUL or lone surrogates."
            )
        # First: it refuses what urlsplit cannot read (a malformed IPv6 host, a bad port).
        refusal = redirect_uri_refusal(uri)
        if refusal is not None:
            raise _redirect_refused(refusal)
        parts = urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise _redirect_refused(
                f"{uri} is not an absolute http(s) URI without a fragment (RFC 6749 §3.1.2)."
            )
        uris.append(uri)
    return uris


def _one_of(value: Any, name: str, allowed: tuple[str, ...], default: list[str]) -> list[str]:
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _metadata_refused(f"{name} must be a list of strings.")
    unknown = [v for v in value if v not in allowed]
    if unknown:
        raise _metadata_refused(
            f"{name} {unknown} not served: Vouch serves only {', '.join(allowed)}."
        )
    return list(dict.fromkeys(value)) or default


# Public clients only, unverified: docs/decisions/0009-clients-register-themselves.md
@dataclass(frozen=True)
class ClientMetadata:
    """What a self-registering client may say about itself, checked (RFC 7591 §2)."""

    redirect_uris: list[str]
    grant_types: list[str]
    client_name: str
    client_uri: str
    scope: str

    @classmethod
    def checked(cls, body: Any) -> ClientMetadata:
        if not isinstance(body, dict):
            raise _metadata_refused("The body must be a JSON object of client metadata.")
        method = body.get("token_endpoint_auth_method", "none")
        if method != "none":
            raise _metadata_refused(
                "Only public clients register themselves: token_endpoint_auth_method must be "
                "none (the client proves itself with PKCE, not a secret)."
            )
        uris = _redirect_uris(body.get("redirect_uris"))
        grants = _one_of(body.get("grant_types"), "grant_types", GRANT_TYPES, list(GRANT_TYPES))
        if "authorization_code" not in grants:
            raise _metadata_refused("grant_types must include authorization_code.")
        _one_of(body.get("response_types"), "response_types", ("code",), ["code"])
        scope = _text(body.get("scope"), "scope")
        unknown = [s for s in scope.split() if s not in settings.AGENT_SCOPES]
        if unknown:
            raise _metadata_refused(
                f"Unknown scope {unknown}: Vouch's scopes are {', '.join(settings.AGENT_SCOPES)}."
            )
        return cls(
            redirect_uris=uris,
            grant_types=grants,
            client_name=_text(body.get("client_name"), "client_name"),
            client_uri=_text(body.get("client_uri"), "client_uri"),
            scope=scope,
        )


def client_register_dynamic(*, metadata: ClientMetadata, address: str) -> RegisteredClient:
    """A public client registered as it asked (already checked), and its registration row."""
    with transaction.atomic():
        application = Application.objects.create(
            name=metadata.client_name or UNNAMED,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(metadata.redirect_uris),
            algorithm="",
            skip_authorization=False,
        )
        return RegisteredClient.objects.create(
            application=application,
            how=RegisteredClient.How.DYNAMIC,
            metadata={
                "redirect_uris": metadata.redirect_uris,
                "grant_types": metadata.grant_types,
                "client_name": metadata.client_name,
                "client_uri": metadata.client_uri,
                "scope": metadata.scope,
            },
            registered_from=address,
        )


def registration_response(registration: RegisteredClient) -> dict[str, Any]:
    """RFC 7591 §3.2.1: the client information, with the metadata as registered."""
    application = registration.application
    metadata = registration.metadata
    body: dict[str, Any] = {
        "client_id": application.client_id,
        "client_id_issued_at": int(registration.registered_at.timestamp()),
        "redirect_uris": application.redirect_uris.split(),
        "token_endpoint_auth_method": "none",
        "grant_types": metadata.get("grant_types", list(GRANT_TYPES)),
        "response_types": ["code"],
        "client_name": application.name,
    }
    for name in ("client_uri", "scope"):
        if metadata.get(name):
            body[name] = metadata[name]
    return body


def client_used(application: Any) -> None:
    """A token was issued to `application`: a self-registered one is in use (not to expire)."""
    RegisteredClient.objects.filter(application=application).update(last_used_at=timezone.now())


def dynamic_clients_expire() -> int:
    """Remove self-registered clients unused for MCP_DYNAMIC_CLIENT_UNUSED_DAYS: registered (or
    last given a token) before then, and holding no code, no unexpired access token and no live
    refresh token now. Staff-registered clients never expire. Returns how many were removed."""
    cutoff = timezone.now() - timedelta(days=settings.MCP_DYNAMIC_CLIENT_UNUSED_DAYS)
    now = timezone.now()
    stale = (
        RegisteredClient.objects.filter(registered_at__lt=cutoff)
        .filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff))
        .annotate(
            has_grant=Exists(Grant.objects.filter(application=OuterRef("application"))),
            has_access=Exists(
                AccessToken.objects.filter(application=OuterRef("application"), expires__gt=now)
            ),
            has_refresh=Exists(
                RefreshToken.objects.filter(
                    application=OuterRef("application"), revoked__isnull=True
                )
            ),
        )
        .filter(has_grant=False, has_access=False, has_refresh=False)
    )
    ids = list(stale.values_list("application_id", flat=True))
    if not ids:
        return 0
    deleted, _ = Application.objects.filter(pk__in=ids).delete()
    return len(ids) if deleted else 0
