"""The two discovery documents an MCP client reads before it sends anyone to log in (SPEC §16):
the authorization server's metadata (RFC 8414) and the MCP resource's protected-resource metadata
(RFC 9728). Both name only what the server really does: the code grant with PKCE S256 and
refresh, the scopes of settings.AGENT_SCOPES, Bearer tokens in the Authorization header."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from oauth2_provider.settings import oauth2_settings

from agents.oauth.server import PKCE_METHOD

# Public clients (an assistant on the person's machine) send no secret; confidential ones send
# the secret the admin showed when the client was registered, either way.
TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]


def _scopes() -> list[str]:
    return list(settings.AGENT_SCOPES)


def authorization_server_metadata(*, origin: str) -> dict[str, Any]:
    """RFC 8414 §2 for the server at `origin`, which is also its issuer identifier (the MCP
    client compares the two as strings). The registration endpoint (RFC 7591, public clients)
    unless MCP_DYNAMIC_REGISTRATION is off. The authorization response carries `iss` (RFC 9207)
    when django-oauth-toolkit's COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS is on, and the document
    says so only then (a client that reads it then refuses a response without one)."""
    document: dict[str, Any] = {
        "issuer": origin,
        "authorization_endpoint": origin + reverse("oauth:authorize"),
        "token_endpoint": origin + reverse("oauth:token"),
        "revocation_endpoint": origin + reverse("oauth:revoke-token"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": [PKCE_METHOD],
        "token_endpoint_auth_methods_supported": TOKEN_ENDPOINT_AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": TOKEN_ENDPOINT_AUTH_METHODS,
        "scopes_supported": _scopes(),
    }
    if settings.MCP_CLIENT_ID_DOCUMENTS:
        document["client_id_metadata_document_supported"] = True
    if settings.MCP_DYNAMIC_REGISTRATION:
        document["registration_endpoint"] = origin + reverse("oauth:register")
    if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
        document["authorization_response_iss_parameter_supported"] = True
    return document


def protected_resource_metadata(*, resource: str, origin: str) -> dict[str, Any]:
    """RFC 9728 §2 for the MCP server `resource`, whose tokens the authorization server at
    `origin` issues."""
    return {
        "resource": resource,
        "authorization_servers": [origin],
        "scopes_supported": _scopes(),
        "bearer_methods_supported": ["header"],
        "resource_name": "Vouch MCP server",
    }
