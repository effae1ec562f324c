"""The buyer's connected assistants (issue 26, SPEC §16): a page of their own listing the
assistants they authorized (client, scopes, last used) with a Revoke that ends its access and
refresh tokens at once; another person's assistants are neither shown nor revocable."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, RefreshToken

from accounts.models import User
from agents.oauth.tokens import TokenRefused, bearer_authenticate
from core.models import AuditEvent
from tests.agents.oauth import MCP, client_register, tokens_for

pytestmark = pytest.mark.django_db

PAGE = "/escrow/assistants/"


def _browser(user: User) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _csrf(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def test_the_page_needs_a_login() -> None:
    response = Client().get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_buyer_sees_the_assistants_they_authorized_with_scopes_and_last_use(
    buyer: User, staff: User
) -> None:
    claude = client_register(name="Claude on my laptop")
    other = client_register(name="Someone else's assistant")
    tokens_for(claude, buyer, scope="escrow:read escrow:refund_request")
    tokens_for(other, staff, scope="escrow:read")

    html = _browser(buyer).get(PAGE).content.decode()

    assert "Claude on my laptop" in html
    assert "escrow:read" in html
    assert "escrow:refund_request" in html
    assert f'data-client="{claude.client_id}"' in html
    assert "Last used" in html
    assert "Someone else" not in html


def test_revoking_an_assistant_ends_its_access_and_refresh_tokens_at_once(buyer: User) -> None:
    claude = client_register(name="Claude on my laptop")
    issued = tokens_for(claude, buyer)
    kept_app = client_register(name="Another assistant")
    kept = tokens_for(kept_app, buyer)
    browser = _browser(buyer)
    # Revoking asks first (issue 41): the confirmation page carries the form that revokes.
    asked = browser.get(f"{PAGE}revoke/", {"client_id": claude.client_id}).content.decode()
    assert "Revoke Claude on my laptop?" in asked
    csrf = _csrf(asked)

    answer = browser.post(
        f"{PAGE}revoke/",
        {"client_id": claude.client_id, "csrfmiddlewaretoken": csrf},
        follow=True,
    )

    assert answer.status_code == 200
    assert "Claude on my laptop" in answer.content.decode()  # named in the confirmation
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=issued["access_token"], resource=MCP)
    assert not RefreshToken.objects.filter(application=claude, revoked__isnull=True).exists()
    refreshed = Client().post(
        "/o/token/",
        {
            "grant_type": "refresh_token",
            "refresh_token": issued["refresh_token"],
            "client_id": claude.client_id,
        },
    )
    assert refreshed.status_code == 400
    assert bearer_authenticate(raw=kept["access_token"], resource=MCP).user == buyer
    event = AuditEvent.objects.get(action="oauth_client.revoke")
    assert (event.actor, event.target_id) == (buyer, claude.client_id)
    assert f'data-client="{claude.client_id}"' not in answer.content.decode()


def test_another_persons_assistant_cannot_be_revoked_and_is_a_404(buyer: User, staff: User) -> None:
    theirs = client_register(name="Staff's assistant")
    issued = tokens_for(theirs, staff)
    mine = client_register(name="Mine")
    tokens_for(mine, buyer)  # its confirmation page then has a form (and its token)
    browser = _browser(buyer)
    csrf = _csrf(browser.get(f"{PAGE}revoke/", {"client_id": mine.client_id}).content.decode())
    # Asking to revoke theirs is the same 404 (and revokes nothing).
    assert browser.get(f"{PAGE}revoke/", {"client_id": theirs.client_id}).status_code == 404

    answer = browser.post(
        f"{PAGE}revoke/", {"client_id": theirs.client_id, "csrfmiddlewaretoken": csrf}
    )

    assert answer.status_code == 404
    assert bearer_authenticate(raw=issued["access_token"], resource=MCP).user == staff
    assert AccessToken.objects.filter(application=theirs).exists()


def test_revoking_without_the_csrf_token_is_refused(buyer: User) -> None:
    claude = client_register(name="Claude on my laptop")
    tokens_for(claude, buyer)
    answer = _browser(buyer).post(f"{PAGE}revoke/", {"client_id": claude.client_id})
    assert answer.status_code == 403
    assert AccessToken.objects.filter(application=claude).exists()
