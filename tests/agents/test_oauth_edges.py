"""The authorization server's edges (issue 26, SPEC §16), each found by an adversarial probe: bad
input at /o/* is a 4xx and never a traceback; a replayed code revokes what it issued; the token
exchange names the redirect URI the authorization request named; failed token requests are
limited per address."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from accounts.models import User
from agents.oauth.limits import TOKEN_FAILURES
from agents.oauth.tokens import TokenRefused, bearer_authenticate
from tests.agents.oauth import (
    MCP,
    authorize_query,
    browser_as,
    code_for,
    consent,
    consent_answer,
    exchange,
    forget_counts,
    pkce_pair,
    token_request,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    forget_counts(TOKEN_FAILURES)  # other tests' failures (the same test client address)


TOKEN_FIELDS = ("client_id", "code", "redirect_uri", "code_verifier", "grant_type", "resource")


@pytest.mark.parametrize("field", TOKEN_FIELDS)
def test_a_nul_in_a_token_request_is_invalid_request_not_a_500(
    app: Application, buyer: User, field: str
) -> None:
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    sent = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1/callback",
        "client_id": app.client_id,
        "code_verifier": verifier,
        "resource": MCP,
    }
    sent[field] = sent[field][:4] + "\x00" + sent[field][4:]
    response = token_request(**sent)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == "invalid_request"
    assert "NUL" in body["error_description"]
    assert not AccessToken.objects.exists()


def test_a_nul_in_a_refresh_token_is_invalid_request_not_a_500(app: Application) -> None:
    response = token_request(
        grant_type="refresh_token", refresh_token="abc\x00def", client_id=app.client_id
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize("field", ["client_id", "redirect_uri", "state", "scope", "resource"])
def test_a_nul_in_an_authorization_request_is_a_400_page(
    app: Application, buyer: User, field: str
) -> None:
    _, challenge = pkce_pair()
    query = authorize_query(app, challenge, **{field: "ab\x00cd"})
    response = browser_as(buyer).get(f"/o/authorize/?{query}")
    assert response.status_code == 400, response.status_code
    assert b"NUL" in response.content


def test_a_nul_smuggled_into_the_consent_form_is_a_400_and_issues_no_code(
    app: Application, buyer: User
) -> None:
    _, challenge = pkce_pair()
    browser = browser_as(buyer)
    page = consent(browser, authorize_query(app, challenge))
    response = consent_answer(browser, page, allow=True, client_id=app.client_id + "\x00")
    assert response.status_code == 400
    assert not Grant.objects.exists()


def test_a_nul_in_a_revocation_is_a_400(app: Application) -> None:
    response = Client().post(
        "/o/revoke_token/",
        "token=abc%00def&client_id=" + app.client_id,
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400, response.content


def test_a_replayed_code_revokes_the_tokens_it_issued(app: Application, buyer: User) -> None:
    """RFC 6749 §4.1.2 / OAuth 2.1 §4.1.3: a code used twice means it leaked; the tokens the first
    use issued are revoked."""
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    first = exchange(app, code, verifier, resource=MCP)
    assert first.status_code == 200, first.content
    issued = first.json()
    assert bearer_authenticate(raw=issued["access_token"], resource=MCP).user == buyer

    replay = exchange(app, code, verifier, resource=MCP)

    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=issued["access_token"], resource=MCP)
    assert not AccessToken.objects.exists()
    assert not RefreshToken.objects.filter(revoked__isnull=True).exists()
    refreshed = token_request(
        grant_type="refresh_token", refresh_token=issued["refresh_token"], client_id=app.client_id
    )
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_grant"


def test_a_replay_revokes_only_that_codes_tokens(app: Application, buyer: User) -> None:
    verifier, challenge = pkce_pair()
    other = exchange(app, code_for(buyer, app, challenge), verifier, resource=MCP).json()
    code = code_for(buyer, app, challenge)
    exchange(app, code, verifier, resource=MCP)

    exchange(app, code, verifier, resource=MCP)

    assert bearer_authenticate(raw=other["access_token"], resource=MCP).user == buyer
    assert AccessToken.objects.count() == 1


def test_the_exchange_must_name_the_redirect_uri_the_request_named(
    app: Application, buyer: User
) -> None:
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    response = token_request(
        grant_type="authorization_code",
        code=code,
        client_id=app.client_id,
        code_verifier=verifier,
        resource=MCP,
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] in ("invalid_request", "invalid_grant")
    assert "redirect_uri" in response.json()["error_description"]
    assert not AccessToken.objects.exists()


def _bad_exchange(app: Application) -> Any:
    return token_request(
        grant_type="authorization_code",
        code="not-a-code",
        redirect_uri="http://127.0.0.1/callback",
        client_id=app.client_id,
        code_verifier="v" * 50,
    )


def test_failed_token_requests_are_limited_per_address(
    app: Application, buyer: User, settings: Any
) -> None:
    settings.OAUTH_TOKEN_FAILURE_RATE = "3/min"
    for _ in range(3):
        assert _bad_exchange(app).status_code == 400
    limited = _bad_exchange(app)
    assert limited.status_code == 429
    assert limited["Content-Type"] == "application/json"
    assert limited.json()["error"] == "slow_down"
    assert 1 <= int(limited["Retry-After"]) <= 60

    # A good code from the same address goes through: another identity's failures never refuse a
    # valid credential (issue 39 item 9, docs/decisions/0016-limits-by-identity.md).
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    assert exchange(app, code, verifier, resource=MCP).status_code == 200
    assert AccessToken.objects.count() == 1


def test_good_token_requests_do_not_count_toward_the_limit(
    app: Application, buyer: User, settings: Any
) -> None:
    settings.OAUTH_TOKEN_FAILURE_RATE = "2/min"
    verifier, challenge = pkce_pair()
    for _ in range(4):
        code = code_for(buyer, app, challenge)
        assert exchange(app, code, verifier, resource=MCP).status_code == 200
