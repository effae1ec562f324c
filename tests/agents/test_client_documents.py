"""Client ID Metadata Documents (issue 26, SPEC §16): a client id that is an https URL names the
client's metadata, which Vouch fetches from a local HTTPS server the test starts: bounded, cached,
checked like a registration, never from a private address outside DEBUG and tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, Application

from accounts.models import User
from agents.models import RegisteredClient
from agents.oauth.tokens import bearer_authenticate
from tests.agents.oauth import (
    MCP,
    DocumentClient,
    authorize_query,
    browser_as,
    consent,
    consent_answer,
    document_body,
    exchange,
    pkce_pair,
    redirect_params,
)
from tests.drivers.https_documents import DocumentServer

pytestmark = pytest.mark.django_db

CALLBACK = "http://127.0.0.1/callback"


def test_a_client_id_url_is_fetched_and_the_client_completes_the_flow(
    document_server: DocumentServer, buyer: User
) -> None:
    url = document_server.url("/clients/assistant.json")
    document_server.serve("/clients/assistant.json", document_body(url))
    verifier, challenge = pkce_pair()
    browser = browser_as(buyer)

    page = consent(browser, authorize_query(DocumentClient(url), challenge))

    assert page.status_code == 200, page.content
    html = page.content.decode()
    assert "Published assistant" in html
    assert 'id="consent-unverified"' in html
    assert url in html
    application = Application.objects.get(client_id=url)
    assert application.client_type == Application.CLIENT_PUBLIC
    registration = RegisteredClient.objects.get(application=application)
    assert registration.how == RegisteredClient.How.METADATA_DOCUMENT
    answer = consent_answer(browser, page, allow=True)
    code = redirect_params(answer["Location"])["code"]
    tokens = exchange(application, code, verifier, resource=MCP)
    assert tokens.status_code == 200, tokens.content
    assert bearer_authenticate(raw=tokens.json()["access_token"], resource=MCP).user == buyer
    assert AccessToken.objects.get().application == application


def test_the_document_is_cached(document_server: DocumentServer, buyer: User) -> None:
    url = document_server.serve("/c.json", document_body(document_server.url("/c.json")))
    _, challenge = pkce_pair()
    for _ in range(3):
        assert (
            consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge)).status_code
            == 200
        )
    assert document_server.hits["/c.json"] == 1


@pytest.mark.parametrize(
    ("served", "status", "says"),
    [
        (
            {"client_id": "https://elsewhere.example/c.json", "redirect_uris": [CALLBACK]},
            200,
            "own URL",
        ),
        ({"redirect_uris": ["http://evil.example/cb"]}, 200, "loopback"),
        ({"grant_types": ["client_credentials"]}, 200, "must include authorization_code"),
        (None, 404, "answered 404"),
        (b"not json", 200, "not JSON"),
        (b"[" * 20000, 200, "over 16384 bytes"),
    ],
)
def test_a_bad_document_is_a_400_page_and_makes_no_client(
    document_server: DocumentServer, buyer: User, served: Any, status: int, says: str
) -> None:
    url = document_server.url("/bad.json")
    if isinstance(served, dict):
        body: Any = (
            document_body(url, **served)
            if "client_id" not in served
            else {**document_body(url), **served}
        )
    else:
        body = served if served is not None else b"{}"
    document_server.serve("/bad.json", body, status=status)
    _, challenge = pkce_pair()

    page = consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge))

    assert page.status_code == 400
    assert says in page.content.decode()
    assert not Application.objects.exists()


def test_a_private_address_is_never_fetched_outside_debug_and_tests(
    document_server: DocumentServer, buyer: User, settings: Any
) -> None:
    settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK = False
    url = document_server.serve("/c.json", document_body(document_server.url("/c.json")))
    _, challenge = pkce_pair()

    page = consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge))

    assert page.status_code == 400
    assert "private or local address" in page.content.decode()
    assert document_server.hits.get("/c.json", 0) == 0
    assert not Application.objects.exists()


def test_a_client_id_url_over_http_or_too_long_is_refused(buyer: User) -> None:
    _, challenge = pkce_pair()
    for url in ("http://127.0.0.1/c.json", "https://127.0.0.1/" + "x" * 100):
        page = consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge))
        assert page.status_code == 400, url
    assert not Application.objects.exists()


def test_the_metadata_says_documents_are_supported(settings: Any) -> None:
    assert (
        Client()
        .get("/.well-known/oauth-authorization-server")
        .json()["client_id_metadata_document_supported"]
        is True
    )
    settings.MCP_CLIENT_ID_DOCUMENTS = False
    document = Client().get("/.well-known/oauth-authorization-server").json()
    assert "client_id_metadata_document_supported" not in document


@pytest.mark.parametrize(
    "url",
    ["https://[::1/c.json", "https://127.0.0.1:99999/c.json", "https://127.0.0.1:x/c.json"],
)
def test_a_malformed_client_id_url_is_a_400_not_a_500(buyer: User, url: str) -> None:
    _, challenge = pkce_pair()
    page = consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge))
    assert page.status_code == 400
    assert not Application.objects.exists()
