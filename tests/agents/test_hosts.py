"""The hosts people connect with, as they are (issue 39 items 2, 3, 4; SPEC §19): each host's
registration request (RFC 7591) or client id metadata document, replayed as the host sends it
(docs/mcp.md's table names the sources), then an authorization with PKCE S256 through to a token
at that host's redirect URI, on another loopback port where the host picks one at run time.
What Vouch doesn't serve (grant types, auth methods, redirect URIs neither loopback nor https) is
left out, the answer says what was kept, and the consent page says what was left out."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.http import HttpResponse
from django.test import Client
from oauth2_provider.models import Application

from accounts.models import User
from agents.models import RegisteredClient
from agents.oauth.limits import REGISTRATIONS
from agents.oauth.tokens import bearer_authenticate
from tests.agents.oauth import (
    MCP,
    browser_as,
    consent,
    consent_answer,
    forget_counts,
    pkce_pair,
    token_request,
)
from tests.drivers.https_documents import DocumentServer

pytestmark = pytest.mark.django_db

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"

# Claude Code: DCR with one localhost callback on the port it listens on when it registers; a
# later authorization listens on another (anthropics/claude-code#10439, #66511).
CLAUDE_CODE = {
    "client_name": "Claude Code (vouch)",
    "redirect_uris": ["http://localhost:54545/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
# claude.ai and Claude Desktop (connectors run from Anthropic's backend): DCR asking for a
# client secret at the token endpoint (anthropics/claude-ai-mcp#1043).
CLAUDE_AI_CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CLAUDE_AI = {
    "client_name": "Claude",
    "redirect_uris": [CLAUDE_AI_CALLBACK],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "client_secret_post",
}
# VS Code: its hosted redirects, the bare loopback and its default port; older releases list the
# device code grant too (microsoft/vscode#278512, use-novamira/novamira#85).
VS_CODE = {
    "client_name": "Visual Studio Code",
    "redirect_uris": [
        "https://insiders.vscode.dev/redirect",
        "https://vscode.dev/redirect",
        "http://127.0.0.1/",
        "http://127.0.0.1:33418/",
    ],
    "grant_types": ["authorization_code", "refresh_token", DEVICE_CODE],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
# Cursor: three redirect URIs in one request, one of them its private-use scheme
# (erp-mafia/accounted#2225).
CURSOR_SCHEME = "cursor://anysphere.cursor-mcp/oauth/callback"
CURSOR = {
    "client_name": "Cursor",
    "redirect_uris": [
        CURSOR_SCHEME,
        "https://www.cursor.com/agents/mcp/oauth/callback",
        "http://localhost:8787/callback",
    ],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
# ChatGPT: a per-connector https callback (kunickiaj/codemem#1286); no published body found.
CHATGPT_CALLBACK = "https://chatgpt.com/connector/oauth/OUbdUMlL15Ct"
CHATGPT = {
    "client_name": "ChatGPT",
    "redirect_uris": [CHATGPT_CALLBACK],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
# The MCP Inspector (modelcontextprotocol/inspector): the SDK's registration, its own port.
INSPECTOR = {
    "client_name": "MCP Inspector",
    "client_uri": "https://github.com/modelcontextprotocol/inspector",
    "redirect_uris": ["http://localhost:6274/oauth/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
    "scope": "escrow:read escrow:refund_request ops:read",
}


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    forget_counts(REGISTRATIONS)


def register(body: dict[str, Any]) -> HttpResponse:
    response: HttpResponse = Client().post(
        "/o/register/", json.dumps(body), content_type="application/json"
    )
    return response


def connect(user: User, client_id: str, redirect_uri: str) -> tuple[HttpResponse, dict[str, Any]]:
    """The consent page for `client_id` at `redirect_uri`, allowed, and the code exchanged
    (PKCE S256, bound to the MCP resource): the page and the token response."""
    verifier, challenge = pkce_pair()
    browser = browser_as(user)
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": "s-1",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": MCP,
            "scope": "escrow:read",
        }
    )
    page = consent(browser, query)
    assert page.status_code == 200, page.content[:800]
    answer = consent_answer(browser, page, allow=True)
    assert answer.status_code == 302, answer.content[:500]
    location = urlsplit(answer["Location"])
    assert answer["Location"].startswith(redirect_uri + "?"), answer["Location"]
    code = dict(parse_qsl(location.query))["code"]
    tokens = token_request(
        grant_type="authorization_code",
        code=code,
        redirect_uri=redirect_uri,
        client_id=client_id,
        code_verifier=verifier,
        resource=MCP,
    )
    assert tokens.status_code == 200, tokens.content
    body: dict[str, Any] = tokens.json()
    assert bearer_authenticate(raw=body["access_token"], resource=MCP).user == user
    return page, body


# --- Item 2: loopback redirect URIs with any port ------------------------------------------------


@pytest.mark.parametrize(
    ("registered", "used"),
    [
        ("http://localhost/callback", "http://localhost:61234/callback"),
        ("http://localhost:54545/callback", "http://localhost:61234/callback"),
        ("http://127.0.0.1:33418/", "http://127.0.0.1:59656/"),
        ("http://[::1]/cb", "http://[::1]:50123/cb"),
    ],
)
def test_a_loopback_redirect_uri_matches_on_any_port(
    buyer: User, registered: str, used: str
) -> None:
    """Issue 39 item 2: only 127.0.0.1 and ::1 got any port; a localhost redirect URI on
    another port than registered was "Mismatching redirect URI" (the 400 page)."""
    response = register({**CLAUDE_CODE, "redirect_uris": [registered]})
    assert response.status_code == 201, response.content
    connect(buyer, response.json()["client_id"], used)


@pytest.mark.parametrize(
    ("registered", "used"),
    [
        ("http://localhost/callback", "http://127.0.0.1:5000/callback"),
        ("http://localhost/callback", "http://localhost:5000/other"),
        ("https://app.example/cb", "https://app.example:8443/cb"),
        ("http://localhost/callback", "http://user@localhost:5000/callback"),
    ],
)
def test_only_the_port_of_a_loopback_redirect_uri_is_free(
    buyer: User, registered: str, used: str
) -> None:
    """The host, path and the rest still match exactly; an https port is still exact."""
    client_id = register({**CLAUDE_CODE, "redirect_uris": [registered]}).json()["client_id"]
    _, challenge = pkce_pair()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": used,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
    )
    page = consent(browser_as(buyer), query)
    assert page.status_code == 400


def test_claude_code_registers_localhost_and_connects_on_another_port(buyer: User) -> None:
    """Issue 39 item 2: Claude Code registered http://localhost:<port>/callback and authorized on
    another port: "Mismatching redirect URI"."""
    response = register(CLAUDE_CODE)
    assert response.status_code == 201, response.content
    connect(buyer, response.json()["client_id"], "http://localhost:61999/callback")


def test_claude_codes_metadata_document_connects_on_any_port(
    document_server: DocumentServer, buyer: User
) -> None:
    """Issue 39 item 2: Claude Code's client id metadata document lists localhost and 127.0.0.1
    without a port (anthropics/claude-code#44429); it listens on an ephemeral one."""
    url = document_server.url("/oauth/claude-code-client-metadata")
    document_server.serve(
        "/oauth/claude-code-client-metadata",
        {
            "client_id": url,
            "client_name": "Claude Code",
            "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    connect(buyer, url, "http://localhost:55611/callback")


# --- Item 3: what is not served is left out, not refused -----------------------------------------


def test_claude_ai_registering_with_client_secret_post_is_registered_public(buyer: User) -> None:
    """Issue 39 item 3: claude.ai's registration with token_endpoint_auth_method
    client_secret_post was 400 invalid_client_metadata."""
    response = register(CLAUDE_AI)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body
    assert body["redirect_uris"] == [CLAUDE_AI_CALLBACK]
    page, _ = connect(buyer, body["client_id"], CLAUDE_AI_CALLBACK)
    html = page.content.decode()
    assert 'id="consent-left-out"' in html
    assert "client_secret_post" in html


def test_claude_ais_metadata_document_with_jwt_bearer_connects(
    document_server: DocumentServer, buyer: User
) -> None:
    """Issue 39 item 3: claude.ai's metadata document lists the jwt-bearer grant among its grant
    types; Vouch refused the whole client (the 400 page, "... not served")."""
    url = document_server.url("/oauth/mcp-oauth-client-metadata")
    document_server.serve(
        "/oauth/mcp-oauth-client-metadata",
        {
            "client_id": url,
            "client_name": "Claude",
            "client_uri": "https://claude.ai",
            "redirect_uris": [CLAUDE_AI_CALLBACK, "https://claude.com/api/mcp/auth_callback"],
            "grant_types": ["authorization_code", "refresh_token", JWT_BEARER],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    page, _ = connect(buyer, url, CLAUDE_AI_CALLBACK)
    html = page.content.decode()
    assert JWT_BEARER in html
    registration = RegisteredClient.objects.get(application__client_id=url)
    assert registration.metadata["grant_types"] == ["authorization_code", "refresh_token"]
    assert registration.metadata["left_out"]["grant_types"] == [JWT_BEARER]


def test_vs_code_with_the_device_code_grant_registers_and_connects(buyer: User) -> None:
    """Issue 39 item 3: an older VS Code registration listing the device_code grant was 400
    invalid_client_metadata ("... not served")."""
    response = register(VS_CODE)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["redirect_uris"] == VS_CODE["redirect_uris"]
    # Port 33418 taken: VS Code listens on another and says so in the authorization request.
    connect(buyer, body["client_id"], "http://127.0.0.1:59656/")


def test_chatgpt_registers_and_connects(buyer: User) -> None:
    response = register(CHATGPT)
    assert response.status_code == 201, response.content
    connect(buyer, response.json()["client_id"], CHATGPT_CALLBACK)


def test_the_inspector_registers_and_connects(buyer: User) -> None:
    response = register(INSPECTOR)
    assert response.status_code == 201, response.content
    assert response.json()["client_uri"] == INSPECTOR["client_uri"]
    connect(buyer, response.json()["client_id"], "http://localhost:6274/oauth/callback")


# --- Item 4: Cursor -------------------------------------------------------------------------------


def test_cursor_is_registered_with_its_two_served_redirect_uris(buyer: User) -> None:
    """Issue 39 item 4: Cursor's registration lists cursor://anysphere.cursor-mcp/oauth/callback
    beside an https and a loopback redirect URI, and the whole request was 400."""
    response = register(CURSOR)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["redirect_uris"] == CURSOR["redirect_uris"][1:]
    application = Application.objects.get(client_id=body["client_id"])
    assert application.redirect_uris.split() == CURSOR["redirect_uris"][1:]
    page, _ = connect(buyer, body["client_id"], "http://localhost:8787/callback")
    html = page.content.decode()
    assert 'id="consent-left-out"' in html
    assert CURSOR_SCHEME in html


def test_the_left_out_redirect_uri_is_never_redirected_to(buyer: User) -> None:
    client_id = register(CURSOR).json()["client_id"]
    _, challenge = pkce_pair()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CURSOR_SCHEME,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
    )
    assert consent(browser_as(buyer), query).status_code == 400


# --- Refused only when nothing usable remains; broken is still broken --------------------------


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"redirect_uris": [CURSOR_SCHEME]}, "invalid_redirect_uri"),
        ({"redirect_uris": [CURSOR_SCHEME, "http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"grant_types": [DEVICE_CODE, "refresh_token"]}, "invalid_client_metadata"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": 5}, "invalid_client_metadata"),
        ({"redirect_uris": [CURSOR_SCHEME, "http://[::1/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://localhost:99999/cb", CURSOR_SCHEME]}, "invalid_redirect_uri"),
        ({"grant_types": ["authorization_code", 7]}, "invalid_client_metadata"),
    ],
)
def test_a_client_with_nothing_usable_or_something_broken_is_refused(
    change: dict[str, Any], error: str
) -> None:
    response = register({**CURSOR, **change})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == error
    assert response.json()["error_description"]
    assert not Application.objects.exists()


def test_the_registration_answer_says_what_was_kept() -> None:
    """RFC 7591 §3.2.1: the answer is the metadata as registered, not as asked."""
    body = register(
        {
            **CURSOR,
            "grant_types": ["authorization_code", "refresh_token", JWT_BEARER, "implicit"],
            "response_types": ["code", "token"],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": "escrow:read offline_access",
        }
    ).json()
    assert body["redirect_uris"] == CURSOR["redirect_uris"][1:]
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"]
    assert body["token_endpoint_auth_method"] == "none"
    assert body["scope"] == "escrow:read"
    registration = RegisteredClient.objects.get(application__client_id=body["client_id"])
    assert registration.metadata["left_out"] == {
        "redirect_uris": [CURSOR_SCHEME],
        "grant_types": [JWT_BEARER, "implicit"],
        "response_types": ["token"],
        "token_endpoint_auth_method": ["client_secret_basic"],
        "scope": ["offline_access"],
    }
