"""Inputs at /o/* that answered 500 with a traceback (issue 38 item 5, SPEC §16): each is now a
400 in the endpoint's own error shape (RFC 7591 at /o/register/, RFC 6749 at /o/token/, the
authorize page's error page at /o/authorize/), and nothing is written to the log as a server
error. Also the 4xx that were not in that shape, and the client id address check's gaps."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client
from oauth2_provider.models import Application

from accounts.models import User
from agents.oauth import client_documents
from agents.oauth.limits import TOKEN_FAILURES
from tests.agents.oauth import (
    authorize_query,
    browser_as,
    forget_counts,
    pkce_pair,
)
from tests.drivers.https_documents import DocumentServer
from tests.drivers.logs import LogTap

pytestmark = pytest.mark.django_db

CALLBACK = "http://127.0.0.1/callback"
SDK_METADATA: dict[str, Any] = {
    "redirect_uris": [CALLBACK],
    "token_endpoint_auth_method": "none",
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "MCP Inspector",
}
SURROGATE = "\ud800"  # a lone surrogate: JSON may escape it ("\\ud800"), UTF-8 cannot hold it


def _register(body: Any, content_type: str = "application/json") -> HttpResponse:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)  # ensure_ascii: \\ud800
    client = Client(raise_request_exception=False)
    response: HttpResponse = client.post("/o/register/", raw, content_type=content_type)
    return response


def _no_server_error(tap: LogTap) -> None:
    text = tap.text()
    assert "Traceback" not in text, text[-2000:]
    assert not [r for r in tap.records() if r.get("level") in ("error", "critical")], text[-2000:]


def _refused_registration(response: HttpResponse, error: str) -> None:
    assert response.status_code == 400, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == error
    assert isinstance(body["error_description"], str)
    assert body["error_description"]
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"client_name": "bad" + SURROGATE}, "invalid_client_metadata"),
        ({"client_uri": "https://x.example/" + SURROGATE}, "invalid_client_metadata"),
        ({"redirect_uris": [CALLBACK + SURROGATE]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://x.example/" + SURROGATE]}, "invalid_redirect_uri"),
        ({"scope": SURROGATE}, "invalid_client_metadata"),
        ({"grant_types": ["authorization_code", SURROGATE]}, "invalid_client_metadata"),
    ],
)
def test_a_lone_surrogate_in_registration_metadata_is_a_400(
    log_tap: LogTap, change: dict[str, Any], error: str
) -> None:
    """Issue 38 item 5: a lone surrogate in client_name, client_uri or a redirect URI reached
    PostgreSQL, which cannot encode it: 500 with a traceback."""
    _refused_registration(_register({**SDK_METADATA, **change}), error)
    _no_server_error(log_tap)


@pytest.mark.parametrize(
    "uri",
    [
        "http://[::1/cb",
        "http://[:::1]/cb",
        "https://[::1/cb",
        "https://[fe80::1%25eth0/cb",
        "http://[127.0.0.1]/cb",
    ],
)
def test_a_malformed_ipv6_redirect_uri_is_invalid_redirect_uri(log_tap: LogTap, uri: str) -> None:
    """Issue 38 item 5: urlsplit raises ValueError on a malformed bracketed host, uncaught: 500."""
    _refused_registration(
        _register({**SDK_METADATA, "redirect_uris": [uri]}), "invalid_redirect_uri"
    )
    _no_server_error(log_tap)


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:99999/cb",
        "http://127.0.0.1:-1/cb",
        "http://127.0.0.1:abc/cb",
        "http://127.0.0.1:0/cb",
        "http://127.0.0.1:+80/cb",
        "http://127.0.0.1:\u0661\u0662/cb",
        "http://[::1]:65536/cb",
        "https://ok.example:99999/cb",
    ],
)
def test_a_redirect_uri_port_outside_1_to_65535_digits_is_refused(
    log_tap: LogTap, uri: str
) -> None:
    """Issue 38 item 5: loopback redirect ports 99999, -1 and abc were registered (201)."""
    _refused_registration(
        _register({**SDK_METADATA, "redirect_uris": [uri]}), "invalid_redirect_uri"
    )
    _no_server_error(log_tap)


def test_the_edge_ports_are_accepted() -> None:
    uris = ["http://127.0.0.1:1/cb", "http://[::1]:65535/cb", "https://ok.example:443/cb"]
    response = _register({**SDK_METADATA, "redirect_uris": uris})
    assert response.status_code == 201, response.content
    assert response.json()["redirect_uris"] == uris


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx"]
)
def test_registration_requires_a_json_content_type(content_type: str) -> None:
    """Issue 38 item 5: /o/register/ ignored Content-Type (RFC 7591 §3.1 says application/json):
    a JSON body sent as text/plain registered a client (201)."""
    _refused_registration(
        _register(SDK_METADATA, content_type=content_type), "invalid_client_metadata"
    )


def test_a_json_content_type_with_a_charset_is_accepted() -> None:
    response = _register(SDK_METADATA, content_type="application/json; charset=utf-8")
    assert response.status_code == 201, response.content


def test_a_3_mb_registration_body_is_a_json_400(log_tap: LogTap) -> None:
    """Issue 38 item 5: a body over DATA_UPLOAD_MAX_MEMORY_SIZE was Django's HTML 400 page
    (RequestDataTooBig), not RFC 7591's JSON error."""
    body = {**SDK_METADATA, "client_name": "x" * (3 * 1024 * 1024)}
    _refused_registration(_register(body), "invalid_client_metadata")
    _no_server_error(log_tap)


def test_the_device_code_grant_is_unsupported_grant_type_and_counted(
    log_tap: LogTap, settings: Any
) -> None:
    """Issue 38 item 5: grant_type=urn:ietf:params:oauth:grant-type:device_code went to
    django-oauth-toolkit's device flow (KeyError without device_code, a DeviceGrant lookup
    with one): 500, and not counted by the failure limit."""
    forget_counts(TOKEN_FAILURES)
    settings.OAUTH_TOKEN_FAILURE_RATE = "2/min"
    client = Client(raise_request_exception=False)
    grant = "urn:ietf:params:oauth:grant-type:device_code"
    for data in ({"grant_type": grant}, {"grant_type": grant, "device_code": "x"}):
        response = client.post("/o/token/", data)
        assert response.status_code == 400, response.content[:500]
        assert response["Content-Type"] == "application/json"
        assert response.json()["error"] == "unsupported_grant_type"
    limited = client.post("/o/token/", {"grant_type": grant, "device_code": "x"})
    assert limited.status_code == 429  # the two above were counted as failures
    assert limited.json()["error"] == "slow_down"
    _no_server_error(log_tap)


def _authorize(user: User, query: str) -> HttpResponse:
    browser = browser_as(user)
    browser.raise_request_exception = False
    response: HttpResponse = browser.get(f"/o/authorize/?{query}")
    return response


class _App:
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id


@pytest.mark.parametrize("uri", ["http://[::1/cb", "http://[:::1]/cb", "http://127.0.0.1:99999/cb"])
def test_a_malformed_redirect_uri_at_authorize_is_the_400_page(
    app: Application, buyer: User, log_tap: LogTap, uri: str
) -> None:
    """Issue 38 item 5: the redirect URI check split the URI with urlsplit, which raised
    ValueError on a malformed IPv6 host: 500 for a signed-in person."""
    _, challenge = pkce_pair()
    page = _authorize(buyer, authorize_query(app, challenge, redirect_uri=uri))
    assert page.status_code == 400, page.content[:500]
    assert "text/html" in page["Content-Type"]
    assert "Location" not in page  # never redirected to a URI the client did not register
    _no_server_error(log_tap)


def _document(url: str, **changes: Any) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "Published assistant",
        "redirect_uris": [CALLBACK],
        "token_endpoint_auth_method": "none",
        **changes,
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"client_name": "bad" + SURROGATE},
        {"client_uri": SURROGATE},
        {"redirect_uris": [CALLBACK + SURROGATE]},
        {"redirect_uris": ["http://[::1/cb"]},
        {"redirect_uris": ["http://[:::1]/cb"]},
        {"redirect_uris": ["http://127.0.0.1:99999/cb"]},
    ],
)
def test_a_client_document_with_a_surrogate_or_malformed_redirect_is_the_400_page(
    document_server: DocumentServer, buyer: User, log_tap: LogTap, changes: dict[str, Any]
) -> None:
    """Issue 38 item 5: a client id metadata document with a surrogate name reached PostgreSQL,
    one with a malformed IPv6 redirect URI reached urlsplit: 500 either way."""
    url = document_server.url("/doc.json")
    document_server.serve("/doc.json", _document(url, **changes))
    _, challenge = pkce_pair()
    page = _authorize(buyer, authorize_query(_App(url), challenge))  # type: ignore[arg-type]
    assert page.status_code == 400, page.content[:500]
    assert "text/html" in page["Content-Type"]
    assert not Application.objects.exists()
    _no_server_error(log_tap)


REFUSED_ADDRESSES = [
    "224.0.0.1",  # IPv4 multicast
    "239.255.255.250",
    "ff0e::1",  # IPv6 global-scope multicast
    "ff02::1",
    "64:ff9b::a00:1",  # NAT64 (RFC 6052) of 10.0.0.1
    "64:ff9b::808:808",  # NAT64 of a public address: still a gateway into someone's network
    "64:ff9b:1::1",  # local-use NAT64 (RFC 8215)
    "::ffff:10.0.0.1",  # IPv4-mapped private
    "::ffff:0:10.0.0.1",  # IPv4-translated (RFC 2765) private
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo
    "0.0.0.0",  # noqa: S104 (an address refused, not bound)
    "::",
    "240.0.0.1",  # reserved
    "169.254.169.254",  # link-local (cloud metadata)
    "fe80::1",
    "100.64.0.1",  # shared address space (CGNAT)
    "10.1.2.3",
    "127.0.0.1",
    "::1",
    "fc00::1",
]


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_special_addresses_are_not_fetchable(address: str) -> None:
    """Issue 38 item 5: multicast and NAT64 addresses passed the client id address check
    (ipaddress calls them global); so did 6to4 and IPv4-translated addresses of private ones."""
    assert not client_documents.address_fetchable(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_fetchable(address: str) -> None:
    assert client_documents.address_fetchable(ipaddress.ip_address(address))


@pytest.mark.parametrize("host", ["[ff0e::1]", "224.0.0.1", "[64:ff9b::a00:1]"])
def test_a_client_id_on_a_multicast_or_nat64_address_is_refused_unfetched(
    buyer: User, settings: Any, host: str
) -> None:
    """Issue 38 item 5: the address check let these through to a fetch attempt."""
    settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK = False
    settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S = 0.5
    _, challenge = pkce_pair()
    url = f"https://{host}/c.json"
    page = _authorize(buyer, authorize_query(_App(url), challenge))  # type: ignore[arg-type]
    assert page.status_code == 400
    assert "private or local address" in page.content.decode()


@pytest.mark.parametrize("path", ["/o/token/", "/o/revoke_token/"])
def test_a_3_mb_token_or_revocation_body_is_a_json_400(log_tap: LogTap, path: str) -> None:
    """Issue 38 item 5 (the same as at /o/register/, found here): a form body over
    DATA_UPLOAD_MAX_MEMORY_SIZE was Django's HTML 400 page (RequestDataTooBig), not RFC 6749's
    JSON error."""
    client = Client(raise_request_exception=False)
    body = "grant_type=" + "x" * (3 * 1024 * 1024)
    response = client.post(path, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "invalid_request"
    _no_server_error(log_tap)


@pytest.mark.parametrize(
    "path",
    ["/o/token/", "/o/register/", "/o/revoke_token/", "/.well-known/oauth-authorization-server"],
)
@pytest.mark.parametrize("query", ["x=%00", "x=" + "a" * 9000])
def test_a_request_refused_before_the_view_is_oauths_json_error(
    client: Client, path: str, query: str
) -> None:
    """A NUL in the query or a URL over REQUEST_MAX_URL_BYTES is refused before any view
    (core.api.middleware): on the OAuth server's machine routes the answer was plain text, which
    no OAuth client reads (RFC 6749 §5.2); now its JSON error `invalid_request`."""
    method = client.get if path.startswith("/.well-known/") else client.post
    response = method(f"{path}?{query}")
    assert response.status_code in (400, 414)
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "invalid_request"
    assert response.json()["error_description"]
