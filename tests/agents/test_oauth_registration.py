"""RFC 7591 dynamic client registration (issue 26, SPEC §16): what the official MCP SDK, the MCP
Inspector and other hosts do when no client id was handed to them. Public clients only, loopback
http or https redirect URIs, limited per address, marked unverified on the consent page, expired
when unused, listed in the admin with whom they acted for; MCP_DYNAMIC_REGISTRATION=false turns
it off."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import User
from agents.models import RegisteredClient
from agents.oauth.limits import REGISTRATIONS
from agents.oauth.registration import dynamic_clients_expire
from tests.agents.oauth import (
    MCP,
    authorize_query,
    browser_as,
    client_register,
    code_for,
    consent,
    exchange,
    forget_counts,
    issue_token,
    pkce_pair,
)

pytestmark = pytest.mark.django_db

CALLBACK = "http://127.0.0.1/callback"
SDK_METADATA = {
    "redirect_uris": [CALLBACK],
    "token_endpoint_auth_method": "none",
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "MCP Inspector",
    "client_uri": "https://github.com/modelcontextprotocol/inspector",
    "scope": "escrow:read escrow:refund_request ops:read",
}


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    forget_counts(REGISTRATIONS)  # other tests' registrations (the same test client address)


def register(body: Any, **extra: Any) -> Any:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    return Client().post("/o/register/", raw, content_type="application/json", **extra)


def test_the_metadata_names_the_registration_endpoint() -> None:
    document = Client().get("/.well-known/oauth-authorization-server").json()
    assert document["registration_endpoint"] == "http://testserver/o/register/"
    assert "none" in document["token_endpoint_auth_methods_supported"]


def test_a_public_client_registers_itself_and_completes_the_flow(buyer: User) -> None:
    response = register(SDK_METADATA)

    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body
    assert body["redirect_uris"] == [CALLBACK]
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["client_name"] == "MCP Inspector"
    assert isinstance(body["client_id_issued_at"], int)
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    registration = RegisteredClient.objects.get(application=application)
    assert registration.how == RegisteredClient.How.DYNAMIC
    assert registration.registered_from == "127.0.0.1"

    verifier, challenge = pkce_pair()
    code = code_for(buyer, application, challenge)
    tokens = exchange(application, code, verifier, resource=MCP)
    assert tokens.status_code == 200, tokens.content
    registration.refresh_from_db()
    assert registration.last_used_at is not None


def test_the_consent_page_marks_a_self_registered_client_unverified(buyer: User) -> None:
    application = Application.objects.get(client_id=register(SDK_METADATA).json()["client_id"])
    _, challenge = pkce_pair()
    html = consent(browser_as(buyer), authorize_query(application, challenge)).content.decode()
    assert "MCP Inspector" in html
    assert 'id="consent-unverified"' in html
    assert "registered itself" in html


def test_a_client_registered_by_staff_is_not_marked_unverified(
    buyer: User, app: Application
) -> None:
    application = app
    _, challenge = pkce_pair()
    html = consent(browser_as(buyer), authorize_query(application, challenge)).content.decode()
    assert 'id="consent-unverified"' not in html


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": "http://127.0.0.1/cb"}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://ok.example/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["/relative"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [CALLBACK + "\x00"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [5]}, "invalid_redirect_uri"),
        ({"client_name": "x" * 256}, "invalid_client_metadata"),
        ({"client_name": "bad\x00name"}, "invalid_client_metadata"),
        ({"client_name": 7}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": 5}, "invalid_client_metadata"),
        ({"grant_types": ["implicit", "refresh_token"]}, "invalid_client_metadata"),
        (
            {"redirect_uris": ["cursor://anysphere.cursor-mcp/oauth/callback"]},
            "invalid_redirect_uri",
        ),
    ],
)
def test_bad_metadata_is_refused_and_registers_nothing(change: dict[str, Any], error: str) -> None:
    response = register({**SDK_METADATA, **change})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == error
    assert response.json()["error_description"]
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    ("change", "kept", "left_out"),
    [
        (
            {"token_endpoint_auth_method": "client_secret_basic"},
            {"token_endpoint_auth_method": "none"},
            {"token_endpoint_auth_method": ["client_secret_basic"]},
        ),
        (
            {"token_endpoint_auth_method": "private_key_jwt"},
            {"token_endpoint_auth_method": "none"},
            {"token_endpoint_auth_method": ["private_key_jwt"]},
        ),
        (
            {"grant_types": ["authorization_code", "implicit"]},
            {"grant_types": ["authorization_code"]},
            {"grant_types": ["implicit"]},
        ),
        ({"scope": "escrow:read root"}, {"scope": "escrow:read"}, {"scope": ["root"]}),
    ],
)
def test_what_is_not_served_is_left_out_and_the_rest_registered(
    change: dict[str, Any], kept: dict[str, Any], left_out: dict[str, list[str]]
) -> None:
    """Issue 39 item 3 (SPEC §19): these were refused whole (400 invalid_client_metadata); the
    answer now says what was kept, and the registration row what was left out."""
    response = register({**SDK_METADATA, **change})
    assert response.status_code == 201, response.content
    body = response.json()
    assert {name: body[name] for name in kept} == kept
    assert RegisteredClient.objects.get().metadata["left_out"] == left_out


@pytest.mark.parametrize("body", ["", "not json", "[]", '"a string"', "{"])
def test_a_body_that_is_no_json_object_is_refused(body: str) -> None:
    response = register(body)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert not Application.objects.exists()


def test_an_omitted_auth_method_registers_a_public_client() -> None:
    body = {k: v for k, v in SDK_METADATA.items() if k != "token_endpoint_auth_method"}
    response = register(body)
    assert response.status_code == 201, response.content
    assert response.json()["token_endpoint_auth_method"] == "none"


def test_registrations_are_limited_per_address(settings: Any) -> None:
    settings.MCP_REGISTRATION_RATE = "2/hour"
    assert register(SDK_METADATA).status_code == 201
    assert register(SDK_METADATA).status_code == 201
    limited = register(SDK_METADATA)
    assert limited.status_code == 429
    assert limited.json()["error"] == "slow_down"
    assert int(limited["Retry-After"]) >= 1
    assert Application.objects.count() == 2


def test_registration_can_be_turned_off(settings: Any) -> None:
    settings.MCP_DYNAMIC_REGISTRATION = False
    assert register(SDK_METADATA).status_code == 404
    document = Client().get("/.well-known/oauth-authorization-server").json()
    assert "registration_endpoint" not in document
    assert not Application.objects.exists()


def test_unused_self_registered_clients_expire(buyer: User, settings: Any) -> None:
    settings.MCP_DYNAMIC_CLIENT_UNUSED_DAYS = 30
    old = timezone.now() - timedelta(days=31)
    unused = Application.objects.get(client_id=register(SDK_METADATA).json()["client_id"])
    used = Application.objects.get(client_id=register(SDK_METADATA).json()["client_id"])
    recent = Application.objects.get(client_id=register(SDK_METADATA).json()["client_id"])
    RegisteredClient.objects.filter(application__in=[unused, used]).update(registered_at=old)
    issue_token(buyer, application=used)
    by_staff = client_register(name="staff's", redirect_uri=CALLBACK)
    Application.objects.filter(pk=by_staff.pk).update(created=old)

    assert dynamic_clients_expire() == 1

    remaining = set(Application.objects.values_list("pk", flat=True))
    assert remaining == {used.pk, recent.pk, by_staff.pk}


def test_the_admin_lists_self_registered_clients_with_whom_they_acted_for(
    buyer: User, staff: User
) -> None:
    application = Application.objects.get(client_id=register(SDK_METADATA).json()["client_id"])
    issue_token(buyer, application=application)
    staff.is_superuser = True
    staff.save()
    admin = Client()
    admin.force_login(staff)

    page = admin.get("/admin/agents/registeredclient/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "MCP Inspector" in html
    assert buyer.get_username() in html
    assert "dynamic registration" in html
