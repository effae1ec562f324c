"""The discovery documents an MCP client reads first (SPEC §16): RFC 8414 authorization-server
metadata and RFC 9728 protected-resource metadata, public JSON, naming exactly what the server
does. The MCP SDK compares `issuer` with the server it was sent to, and `resource` with the URL
it connects to, as strings."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

SCOPES = ["escrow:read", "escrow:refund_request", "ops:read"]


def test_authorization_server_metadata_names_the_code_grant_with_s256_only(db: None) -> None:
    response = Client().get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response.json() == {
        "issuer": "http://testserver",
        "authorization_endpoint": "http://testserver/o/authorize/",
        "token_endpoint": "http://testserver/o/token/",
        "revocation_endpoint": "http://testserver/o/revoke_token/",
        "registration_endpoint": "http://testserver/o/register/",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ],
        "revocation_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ],
        "scopes_supported": SCOPES,
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


def test_the_issuer_is_the_origin_the_request_came_to(db: None) -> None:
    """A server reached at another host or port names itself there, so the issuer the client
    derived from the metadata URL matches (RFC 8414 §3.3)."""
    document = (
        Client().get("/.well-known/oauth-authorization-server", HTTP_HOST="localhost:8765").json()
    )
    assert document["issuer"] == "http://localhost:8765"
    assert document["token_endpoint"] == "http://localhost:8765/o/token/"
    secure = Client().get("/.well-known/oauth-authorization-server", secure=True).json()
    assert secure["issuer"] == "https://testserver"


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
def test_protected_resource_metadata_names_the_mcp_resource_and_this_server(
    db: None, path: str
) -> None:
    """At the path-based URL the MCP client tries first and at the root it falls back to."""
    response = Client().get(path)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "resource": "http://testserver/mcp",
        "authorization_servers": ["http://testserver"],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Vouch MCP server",
    }


@override_settings(MCP_RESOURCE_URL="https://vouch.example/mcp")
def test_a_configured_mcp_resource_url_is_the_resource_named(db: None) -> None:
    document = Client().get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == "https://vouch.example/mcp"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ],
)
def test_the_documents_answer_get_only_and_need_no_login(db: None, path: str) -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.get(path).status_code == 200
    assert client.head(path).status_code == 200
    assert client.post(path).status_code == 405
    assert client.put(path).status_code == 405


def test_nothing_else_of_django_oauth_toolkit_is_routed(db: None) -> None:
    """No self-service application pages, introspection, device flow or OpenID Connect (dynamic
    registration is Vouch's own, POST only: tests/agents/test_oauth_registration.py)."""
    client = Client()
    for path in (
        "/o/applications/",
        "/o/introspect/",
        "/o/device-authorization/",
        "/o/authorized_tokens/",
        "/.well-known/openid-configuration",
        "/o/userinfo/",
        "/register",
    ):
        assert client.get(path).status_code == 404, path
    assert client.get("/o/register/").status_code == 405
