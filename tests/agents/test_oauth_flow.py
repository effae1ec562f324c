"""Vouch as the OAuth 2.1 authorization server of /mcp (SPEC §16), walked through its views with
real django-oauth-toolkit rows in PostgreSQL: login through allauth, the consent page, the code
with PKCE S256, the token bound to the MCP resource (RFC 8707), refresh rotation, and every
refusal the issue names."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from accounts.models import User
from agents.oauth.tokens import TokenRefused, bearer_authenticate
from tests.agents.oauth import (
    MCP,
    REDIRECT_URI,
    authorize_query,
    browser_as,
    client_register,
    code_for,
    consent,
    consent_answer,
    exchange,
    form_fields,
    issue_token,
    pkce_pair,
    redirect_params,
    token_request,
    tokens_for,
)

pytestmark = pytest.mark.django_db


# --- the whole flow -----------------------------------------------------------------------------


def test_code_pkce_flow_login_consent_token_bound_to_the_mcp_resource(
    app: Application, buyer: User
) -> None:
    """Anonymous → allauth login (?next=) → consent page listing the client and each scope in
    words → Allow → code (with state and iss) → token for the code_verifier, bound to /mcp:
    bearer_authenticate accepts it for the MCP resource and refuses it for another."""
    verifier, challenge = pkce_pair()
    query = authorize_query(app, challenge)
    browser = Client(enforce_csrf_checks=True)

    to_login = browser.get(f"/o/authorize/?{query}")
    assert to_login.status_code == 302
    login_url = urlsplit(to_login["Location"])
    assert login_url.path == "/accounts/login/"
    next_url = dict(parse_qsl(login_url.query))["next"]
    assert next_url == f"/o/authorize/?{query}"

    login_page = browser.get(to_login["Location"])
    logged_in = browser.post(
        "/accounts/login/",
        {
            "login": "alice",
            "password": "alice-password-1",
            "next": next_url,
            "csrfmiddlewaretoken": form_fields(login_page.content.decode())["csrfmiddlewaretoken"],
        },
    )
    assert logged_in.status_code == 302
    assert logged_in["Location"] == next_url

    page = browser.get(next_url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Claude on Alice&#x27;s laptop" in html
    assert "See your envelopes, their balances and your refunds." in html
    assert "Propose a refund of an envelope&#x27;s unspent money" in html
    assert "Staff only" not in html  # ops:read was not asked for
    assert "No refund happens without you" in html
    assert 'id="consent-allow"' in html
    assert 'id="consent-deny"' in html
    assert MCP in html

    answer = consent_answer(browser, page, allow=True)
    assert answer.status_code == 302
    params = redirect_params(answer["Location"])
    assert params["state"] == "state-123"
    assert params["iss"] == "http://testserver"
    grant = Grant.objects.get()
    assert grant.resource == [MCP]
    assert grant.code_challenge_method == "S256"

    response = exchange(app, params["code"], verifier, resource=MCP)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["scope"] == "escrow:read escrow:refund_request"
    assert 0 < body["expires_in"] <= 3600
    assert body["refresh_token"]

    row = AccessToken.objects.get()
    assert row.resource == [MCP]
    assert row.user == buyer
    assert row.token == ""  # only its checksum is stored
    assert row.expires <= timezone.now() + timedelta(seconds=3600)

    principal = bearer_authenticate(raw=body["access_token"], resource=MCP)
    assert principal.user == buyer
    assert principal.scopes == {"escrow:read", "escrow:refund_request"}
    assert principal.client_id == app.client_id
    assert principal.allows("escrow:refund_request")
    assert not principal.allows("ops:read")
    for other in ("http://other.example/mcp", "http://testserver/api", "https://testserver/mcp"):
        with pytest.raises(TokenRefused) as refused:
            bearer_authenticate(raw=body["access_token"], resource=other)
        assert refused.value.reason == "wrong_resource"

    # A code is good once.
    again = exchange(app, params["code"], verifier, resource=MCP)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"


def test_a_request_that_names_no_resource_still_gets_a_token_bound_to_mcp(
    app: Application, buyer: User
) -> None:
    """RFC 8707 lets the client leave `resource` out; the token is bound to /mcp all the same
    (a token bound to nothing would be refused at /mcp)."""
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge, resource=None)
    response = exchange(app, code, verifier)
    assert response.status_code == 200, response.content
    assert AccessToken.objects.get().resource == [MCP]
    bearer_authenticate(raw=response.json()["access_token"], resource=MCP)


def test_the_consent_page_is_shown_every_time_even_to_a_client_that_asks_to_skip(
    app: Application, buyer: User
) -> None:
    """No silent re-authorization: skip_authorization and approval_prompt=auto are ignored, and
    prompt=none (which forbids asking) is answered consent_required."""
    Application.objects.filter(pk=app.pk).update(skip_authorization=True)
    tokens_for(app, buyer)
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge) + "&approval_prompt=auto")
    assert page.status_code == 200
    assert 'id="consent-allow"' in page.content.decode()
    assert Grant.objects.count() == 0

    silent = consent(browser, authorize_query(app, challenge) + "&prompt=none")
    assert silent.status_code == 302
    assert redirect_params(silent["Location"])["error"] == "consent_required"


def test_deny_sends_the_client_access_denied_and_issues_nothing(
    app: Application, buyer: User
) -> None:
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge))
    answer = consent_answer(browser, page, allow=False)
    assert answer.status_code == 302
    params = redirect_params(answer["Location"])
    assert params["error"] == "access_denied"
    assert params["state"] == "state-123"
    assert "code" not in params
    assert Grant.objects.count() == 0


# --- PKCE: S256 only ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["plain", None])
def test_plain_pkce_is_refused_before_any_consent(
    app: Application, buyer: User, method: str | None
) -> None:
    """`plain`, and a challenge without a method (which RFC 7636 reads as plain), are refused
    at the client's redirect URI with invalid_request naming S256; no page, no code."""
    verifier, _ = pkce_pair()
    response = consent(
        browser_as(buyer), authorize_query(app, verifier, code_challenge_method=method)
    )
    assert response.status_code == 302
    params = redirect_params(response["Location"])
    assert params["error"] == "invalid_request"
    assert "S256" in params["error_description"]
    assert params["state"] == "state-123"
    assert Grant.objects.count() == 0


def test_a_request_without_a_code_challenge_is_refused(app: Application, buyer: User) -> None:
    response = consent(
        browser_as(buyer),
        authorize_query(app, "", code_challenge=None, code_challenge_method=None),
    )
    assert response.status_code == 302
    params = redirect_params(response["Location"])
    assert params["error"] == "invalid_request"
    assert params["error_description"] == "Code challenge required."
    assert Grant.objects.count() == 0


def test_a_wrong_code_verifier_gets_no_token(app: Application, buyer: User) -> None:
    _, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    other_verifier, _ = pkce_pair()
    response = exchange(app, code, other_verifier, resource=MCP)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert AccessToken.objects.count() == 0


def test_a_plain_method_smuggled_into_the_consent_form_issues_no_code(
    app: Application, buyer: User
) -> None:
    browser = browser_as(buyer)
    verifier, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge))
    answer = consent_answer(
        browser, page, allow=True, code_challenge=verifier, code_challenge_method="plain"
    )
    assert answer.status_code == 302
    assert redirect_params(answer["Location"])["error"] == "invalid_request"
    assert Grant.objects.count() == 0


# --- RFC 8707: the MCP resource, nothing else ---------------------------------------------------


@pytest.mark.parametrize(
    "resource",
    [
        "http://other.example/mcp",
        "http://testserver/api/v1",
        "http://testserver/mcp/other",
        "https://testserver/mcp",
        "not a uri",
    ],
)
def test_an_authorization_request_for_another_resource_is_invalid_target(
    app: Application, buyer: User, resource: str
) -> None:
    _, challenge = pkce_pair()
    response = consent(browser_as(buyer), authorize_query(app, challenge, resource=resource))
    assert response.status_code == 302
    params = redirect_params(response["Location"])
    assert params["error"] == "invalid_target"
    assert MCP in params["error_description"]
    assert params["state"] == "state-123"
    assert Grant.objects.count() == 0


def test_another_resource_smuggled_into_the_consent_form_is_invalid_target(
    app: Application, buyer: User
) -> None:
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge))
    answer = consent_answer(browser, page, allow=True, resource="http://other.example/mcp")
    assert redirect_params(answer["Location"])["error"] == "invalid_target"
    assert Grant.objects.count() == 0


def test_a_token_request_naming_another_resource_is_invalid_target(
    app: Application, buyer: User
) -> None:
    """The token request's `resource`, when sent, must be the grant's."""
    verifier, challenge = pkce_pair()
    code = code_for(buyer, app, challenge)
    response = exchange(app, code, verifier, resource="http://other.example/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert AccessToken.objects.count() == 0


# --- scopes ---------------------------------------------------------------------------------------


def test_a_buyer_asking_for_more_than_they_hold_is_granted_the_subset_they_hold(
    app: Application, buyer: User
) -> None:
    """A generic client (the MCP Inspector) asks for every scope the metadata lists, staff's
    too: the buyer is offered what they may grant, told what is left out, and the token
    response's `scope` says what was granted."""
    browser = browser_as(buyer)
    verifier, challenge = pkce_pair()
    asked = "escrow:read escrow:refund_request ops:read"
    page = consent(browser, authorize_query(app, challenge, scope=asked))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="consent-allow"' in html
    assert 'id="consent-refusal"' not in html
    assert 'id="consent-withheld"' in html
    assert "ops:read" in html.split('id="consent-withheld"')[1]
    assert "Staff only: read escalations" not in html  # not offered

    answer = consent_answer(browser, page, allow=True)
    code = redirect_params(answer["Location"])["code"]
    body = exchange(app, code, verifier, resource=MCP).json()

    assert body["scope"] == "escrow:read escrow:refund_request"
    principal = bearer_authenticate(raw=body["access_token"], resource=MCP)
    assert principal.scopes == {"escrow:read", "escrow:refund_request"}


def test_a_buyer_asking_only_for_staff_scopes_is_refused_at_consent(
    app: Application, buyer: User
) -> None:
    """Nothing remains to grant: the page says ops:read is for staff and offers only Deny; an
    Allow posted anyway (a tampered form) sends the client access_denied, and no code or token
    exists."""
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge, scope="ops:read"))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="consent-refusal"' in html
    assert "ops:read is for Vouch staff only" in html
    assert 'id="consent-allow"' not in html
    assert 'id="consent-deny"' in html

    answer = consent_answer(browser, page, allow=True)
    assert answer.status_code == 302
    params = redirect_params(answer["Location"])
    assert params["error"] == "access_denied"
    assert "staff only" in params["error_description"]
    assert Grant.objects.count() == 0
    assert AccessToken.objects.count() == 0


def test_a_staff_scope_smuggled_into_a_buyers_consent_form_is_access_denied(
    app: Application, buyer: User
) -> None:
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge, scope="escrow:read ops:read"))

    answer = consent_answer(browser, page, allow=True, scope="escrow:read ops:read")

    assert redirect_params(answer["Location"])["error"] == "access_denied"
    assert Grant.objects.count() == 0


def test_staff_may_grant_ops_read(app: Application, staff: User) -> None:
    browser = browser_as(staff)
    _, challenge = pkce_pair()
    page = consent(browser, authorize_query(app, challenge, scope="escrow:read ops:read"))
    html = page.content.decode()
    assert "Staff only: read escalations, disputes, evidence packets and discrepancies." in html
    assert "No refund happens without you" not in html  # escrow:refund_request not asked for
    assert 'id="consent-allow"' in html
    assert 'id="consent-refusal"' not in html

    body = tokens_for(app, staff, scope="escrow:read ops:read")
    assert body["scope"] == "escrow:read ops:read"
    principal = bearer_authenticate(raw=body["access_token"], resource=MCP)
    assert principal.allows("ops:read")


def test_an_unknown_scope_is_invalid_scope(app: Application, buyer: User) -> None:
    _, challenge = pkce_pair()
    response = consent(
        browser_as(buyer), authorize_query(app, challenge, scope="escrow:read escrow:write")
    )
    assert response.status_code == 302
    assert redirect_params(response["Location"])["error"] == "invalid_scope"
    assert Grant.objects.count() == 0


# --- clients ------------------------------------------------------------------------------------


def test_an_unknown_client_or_unregistered_redirect_uri_is_never_redirected_to(
    app: Application, buyer: User
) -> None:
    browser = browser_as(buyer)
    _, challenge = pkce_pair()
    for overrides in (
        {"client_id": "no-such-client"},
        {"redirect_uri": "https://attacker.example/callback"},
    ):
        response = consent(browser, authorize_query(app, challenge, **overrides))
        assert response.status_code == 400, overrides
        assert "This authorization request cannot be completed" in response.content.decode()
    # Nor when the consent form comes back naming another redirect URI.
    page = consent(browser, authorize_query(app, challenge))
    answer = consent_answer(browser, page, allow=False, redirect_uri="https://attacker.example/cb")
    assert answer.status_code == 400
    assert Grant.objects.count() == 0


@pytest.mark.parametrize(
    "grant_type",
    [
        Application.GRANT_CLIENT_CREDENTIALS,
        Application.GRANT_PASSWORD,
        Application.GRANT_IMPLICIT,
        Application.GRANT_OPENID_HYBRID,
    ],
)
def test_an_application_registered_for_another_grant_gets_no_token(
    buyer: User, grant_type: str
) -> None:
    """Only the authorization code grant is served: an application registered for another one
    is refused a code (unauthorized_client) and its own grant is not served at all."""
    other = Application.objects.create(
        name="other",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=grant_type,
        redirect_uris=REDIRECT_URI,
        client_secret="s3cret-value-for-tests",
        hash_client_secret=False,
        algorithm="",
    )
    _, challenge = pkce_pair()
    response = consent(browser_as(buyer), authorize_query(other, challenge))
    assert response.status_code == 302
    assert redirect_params(response["Location"])["error"] == "unauthorized_client"

    for data in (
        {"grant_type": "client_credentials"},
        {"grant_type": "password", "username": "alice", "password": "alice-password-1"},
    ):
        token = token_request(
            client_id=other.client_id, client_secret="s3cret-value-for-tests", **data
        )
        assert token.status_code == 400, data
        assert token.json()["error"] == "unsupported_grant_type"
    implicit = consent(browser_as(buyer), authorize_query(other, challenge, response_type="token"))
    assert redirect_params(implicit["Location"])["error"] == "unsupported_response_type"
    assert AccessToken.objects.count() == 0


def test_http_redirect_uris_only_on_loopback(buyer: User) -> None:
    """A client registered (outside the admin's form) with a plain-http redirect URI on a
    real host is refused as an invalid redirect URI: http is only for the person's machine."""
    remote = client_register(redirect_uri="http://assistant.example/callback")
    _, challenge = pkce_pair()
    response = consent(
        browser_as(buyer),
        authorize_query(remote, challenge, redirect_uri="http://assistant.example/callback"),
    )
    assert response.status_code == 400
    assert Grant.objects.count() == 0


def test_a_loopback_redirect_uri_may_use_any_port(app: Application, buyer: User) -> None:
    """RFC 8252 §7.3: an assistant's callback listens on a port of its choosing."""
    browser = browser_as(buyer)
    verifier, challenge = pkce_pair()
    page = consent(
        browser, authorize_query(app, challenge, redirect_uri="http://127.0.0.1:53682/callback")
    )
    answer = consent_answer(browser, page, allow=True)
    location = urlsplit(answer["Location"])
    assert location.netloc == "127.0.0.1:53682"
    code = dict(parse_qsl(location.query))["code"]
    response = token_request(
        grant_type="authorization_code",
        code=code,
        redirect_uri="http://127.0.0.1:53682/callback",
        client_id=app.client_id,
        code_verifier=verifier,
    )
    assert response.status_code == 200, response.content


# --- refresh ------------------------------------------------------------------------------------


def test_refresh_rotates_keeps_the_resource_and_a_replayed_token_revokes_the_family(
    app: Application, buyer: User
) -> None:
    first = tokens_for(app, buyer)
    refreshed = token_request(
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        client_id=app.client_id,
        resource=MCP,
    )
    assert refreshed.status_code == 200, refreshed.content
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    assert second["scope"] == "escrow:read"
    assert 0 < second["expires_in"] <= 3600
    principal = bearer_authenticate(raw=second["access_token"], resource=MCP)
    assert principal.user == buyer
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=first["access_token"], resource=MCP)

    # Without `resource` the refresh keeps the binding too.
    third = token_request(
        grant_type="refresh_token", refresh_token=second["refresh_token"], client_id=app.client_id
    )
    assert third.status_code == 200, third.content
    latest = third.json()
    assert AccessToken.objects.get().resource == [MCP]
    bearer_authenticate(raw=latest["access_token"], resource=MCP)

    # The old refresh token no longer works, and its replay revokes the whole family.
    replay = token_request(
        grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=app.client_id
    )
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    with pytest.raises(TokenRefused) as refused:
        bearer_authenticate(raw=latest["access_token"], resource=MCP)
    assert refused.value.reason == "unknown"
    after = token_request(
        grant_type="refresh_token", refresh_token=latest["refresh_token"], client_id=app.client_id
    )
    assert after.status_code == 400
    assert not RefreshToken.objects.filter(revoked__isnull=True).exists()


def test_a_refresh_for_another_resource_is_invalid_target(app: Application, buyer: User) -> None:
    first = tokens_for(app, buyer)
    response = token_request(
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        client_id=app.client_id,
        resource="http://other.example/mcp",
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    bearer_authenticate(raw=first["access_token"], resource=MCP)


# --- lifetime and revocation by the client ------------------------------------------------------


def test_an_expired_access_token_is_refused(buyer: User) -> None:
    raw = issue_token(buyer, resource=MCP, expires_in=3600)
    bearer_authenticate(raw=raw, resource=MCP)
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    with pytest.raises(TokenRefused) as refused:
        bearer_authenticate(raw=raw, resource=MCP)
    assert refused.value.reason == "expired"


def test_the_client_revokes_its_own_token(app: Application, buyer: User) -> None:
    """RFC 7009 at /o/revoke_token/: revoking the access token revokes its refresh token too."""
    body = tokens_for(app, buyer)
    revoked = Client().post(
        "/o/revoke_token/",
        urlencode({"token": body["access_token"], "client_id": app.client_id}),
        content_type="application/x-www-form-urlencoded",
    )
    assert revoked.status_code == 200
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=body["access_token"], resource=MCP)
    refresh = token_request(
        grant_type="refresh_token", refresh_token=body["refresh_token"], client_id=app.client_id
    )
    assert refresh.status_code == 400


def test_an_access_token_lifetime_over_an_hour_is_refused_at_startup() -> None:
    """OAUTH_ACCESS_TOKEN_SECONDS cannot stretch an access token past the hour SPEC §16 allows:
    the settings refuse to load."""
    env = {**os.environ, "OAUTH_ACCESS_TOKEN_SECONDS": "3601"}
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings.test"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "OAUTH_ACCESS_TOKEN_SECONDS must be from 1 to 3600" in result.stderr
    env["OAUTH_ACCESS_TOKEN_SECONDS"] = "3600"
    assert (
        subprocess.run(
            [sys.executable, "-c", "import config.settings.test"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
