"""Clients that register themselves (SPEC §16, §19): RFC 7591 dynamic registration, for public
clients only, which is what the official MCP SDK, the MCP Inspector and other hosts do when nobody
handed them a client id. What a client says about itself is checked here and nothing else is
trusted: it gets the authorization code grant with PKCE S256 (refresh with it), no secret, and only
redirect URIs a person's own machine (loopback http) or an https site can receive. What it asks
for beyond that (a secret, other grants, a private-use redirect scheme such as cursor://) is left
out and recorded, not refused (decision 0017); its consent page marks it unverified and says what
was left out, and a client nobody used for MCP_DYNAMIC_CLIENT_UNUSED_DAYS is removed.

Errors are RFC 7591 §3.2.2's: `invalid_redirect_uri` or `invalid_client_metadata`, for metadata
that is broken or leaves nothing usable, each with a description that says what to send instead."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from agents.models import RegisteredClient
from agents.oauth.policy import redirect_uri_malformed, redirect_uri_served

GRANT_TYPES = ("authorization_code", "refresh_token")
NAME_MAX = 255
REDIRECT_URIS_MAX = 10
LIST_MAX = 20
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


def _redirect_uris(value: Any) -> tuple[list[str], list[str]]:
    """The redirect URIs Vouch sends codes to, and those it leaves out (neither https nor http
    on a loopback host: cursor://..., http elsewhere). A URI that is broken rather than unserved
    (not a string, spaces, NUL, a lone surrogate, an unreadable host or port, an https URI with
    no host or with a fragment) refuses the registration whole."""
    if not isinstance(value, list) or not value:
        raise _redirect_refused("redirect_uris must be a non-empty list of absolute URIs.")
    if len(value) > REDIRECT_URIS_MAX:
        raise _redirect_refused(f"At most {REDIRECT_URIS_MAX} redirect_uris.")
    kept: list[str] = []
    left_out: list[str] = []
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
        malformed = redirect_uri_malformed(uri)
        if malformed is not None:
            raise _redirect_refused(malformed)
        if not redirect_uri_served(uri):
            left_out.append(uri)
            continue
        parts = urlsplit(uri)
        if not parts.netloc or parts.fragment or "#" in uri:
            raise _redirect_refused(
                f"{uri} is not an absolute http(s) URI without a fragment (RFC 6749 §3.1.2)."
            )
        kept.append(uri)
    if not kept:
        raise _redirect_refused(
            "None of redirect_uris is one Vouch sends codes to: https, or http on a loopback "
            f"host (127.0.0.1, [::1], localhost). Left out: {', '.join(left_out)}."
        )
    return list(dict.fromkeys(kept)), list(dict.fromkeys(left_out))


def _strings(value: Any, name: str) -> list[str] | None:
    """A list of short storable strings as the client sent it, or None when it sent none."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > LIST_MAX
        or not all(isinstance(v, str) and storable(v) and len(v) <= NAME_MAX for v in value)
    ):
        raise _metadata_refused(
            f"{name} must be a list of at most {LIST_MAX} strings of valid Unicode text, each at "
            f"most {NAME_MAX} characters."
        )
    return list(dict.fromkeys(value))


def _served(
    value: Any, name: str, served: tuple[str, ...], default: list[str]
) -> tuple[list[str], list[str]]:
    """What of `value` Vouch serves (in the client's order) and what it leaves out; the default
    when the client named none."""
    asked = _strings(value, name)
    if not asked:
        return list(default), []
    return [v for v in asked if v in served], [v for v in asked if v not in served]


def _auth_method(value: Any) -> list[str]:
    """The token endpoint auth method left out ([] for none). Every self-registered client is
    public and proves itself with PKCE; one that asked for a secret gets none and is told so."""
    if value is None:
        return []
    if not isinstance(value, str) or not storable(value) or len(value) > NAME_MAX:
        raise _metadata_refused(
            "token_endpoint_auth_method must be a string (Vouch's clients use none)."
        )
    return [] if value == "none" else [value]


# Public clients only, unverified; what is not served is left out, not refused:
# docs/decisions/0017-hosts-as-they-are.md, superseding the refusals of
# docs/decisions/0009-clients-register-themselves.md
@dataclass(frozen=True)
class ClientMetadata:
    """What a self-registering client may say about itself, checked (RFC 7591 §2), and what
    Vouch left out of it (`left_out`: field name to the values not served)."""

    redirect_uris: list[str]
    grant_types: list[str]
    client_name: str
    client_uri: str
    scope: str
    left_out: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def checked(cls, body: Any) -> ClientMetadata:
        """RFC 7591 §3.2.1 lets the server replace what it does not serve: unserved grant types,
        response types, auth methods, scopes and redirect URIs are left out. Refused: a body
        that is broken (wrong types, text PostgreSQL cannot hold, a malformed URI), or one with
        nothing usable left (no redirect URI, no authorization code grant, no `code` response)."""
        if not isinstance(body, dict):
            raise _metadata_refused("The body must be a JSON object of client metadata.")
        method_left_out = _auth_method(body.get("token_endpoint_auth_method"))
        uris, uris_left_out = _redirect_uris(body.get("redirect_uris"))
        grants, grants_left_out = _served(
            body.get("grant_types"), "grant_types", GRANT_TYPES, list(GRANT_TYPES)
        )
        if "authorization_code" not in grants:
            raise _metadata_refused(
                "grant_types must include authorization_code: Vouch serves only "
                f"{', '.join(GRANT_TYPES)}."
            )
        responses, responses_left_out = _served(
            body.get("response_types"), "response_types", ("code",), ["code"]
        )
        if "code" not in responses:
            raise _metadata_refused("response_types must include code: Vouch serves only code.")
        asked_scopes = list(dict.fromkeys(_text(body.get("scope"), "scope").split()))
        scopes = [s for s in asked_scopes if s in settings.AGENT_SCOPES]
        left_out = {
            name: values
            for name, values in (
                ("redirect_uris", uris_left_out),
                ("grant_types", grants_left_out),
                ("response_types", responses_left_out),
                ("token_endpoint_auth_method", method_left_out),
                ("scope", [s for s in asked_scopes if s not in scopes]),
            )
            if values
        }
        return cls(
            redirect_uris=uris,
            grant_types=grants,
            client_name=_text(body.get("client_name"), "client_name"),
            client_uri=_text(body.get("client_uri"), "client_uri"),
            scope=" ".join(scopes),
            left_out=left_out,
        )


_LEFT_OUT_WORDS = {
    "redirect_uris": (
        "the redirect URI",
        "Vouch sends codes only to https, or to http on 127.0.0.1, [::1] or localhost",
    ),
    "grant_types": ("the grant type", "Vouch serves only authorization_code and refresh_token"),
    "response_types": ("the response type", "Vouch serves only code"),
    "token_endpoint_auth_method": (
        "the token endpoint auth method",
        "Vouch's self-registered clients are public: none, with PKCE",
    ),
    "scope": ("the scope", "Vouch does not know it"),
}


def left_out_described(left_out: Any) -> list[str]:
    """What was left out of a registration (RegisteredClient.metadata["left_out"]), in words for
    the consent page, e.g. "the grant type urn:...:jwt-bearer (Vouch serves only ...)"."""
    if not isinstance(left_out, dict):
        return []
    lines = []
    for name, (what, why) in _LEFT_OUT_WORDS.items():
        values = left_out.get(name) or []
        if values:
            lines.append(f"{what} {', '.join(str(v) for v in values)} ({why})")
    return lines


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
                "left_out": metadata.left_out,
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
