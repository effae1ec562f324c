"""Where a person lands after signing in (issue 27): staff on the ops console, a buyer on their
envelopes; an explicit `next` on this site wins, one elsewhere is ignored. The sign-in message is
shown on the page they land on."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User

PASSWORD = "pw-landing-123"


@pytest.fixture
def shopper(db: None) -> User:
    return User.objects.create_user("shopper", "shopper@example.com", PASSWORD)


@pytest.fixture
def operator(db: None) -> User:
    return User.objects.create_user("operator", "op@example.com", PASSWORD, is_staff=True)


def _sign_in(username: str, next_url: str | None = None) -> tuple[Client, str]:
    client = Client()
    path = reverse("account_login")
    if next_url is not None:
        path += f"?next={next_url}"
    response = client.post(path, {"login": username, "password": PASSWORD})
    assert response.status_code == 302, response.content
    return client, response["Location"]


def test_a_buyer_lands_on_their_envelopes_with_the_sign_in_message(shopper: User) -> None:
    client, landing = _sign_in("shopper")
    assert landing == "/escrow/envelopes/"
    page = client.get(landing)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Your envelopes" in text
    assert "Successfully signed in as shopper." in text


def test_staff_land_on_the_ops_console(operator: User) -> None:
    client, landing = _sign_in("operator")
    assert landing == "/admin/"
    assert client.get(landing).status_code == 200


def test_an_explicit_next_on_this_site_wins(shopper: User, operator: User) -> None:
    assert _sign_in("shopper", "/escrow/assistants/")[1] == "/escrow/assistants/"
    assert _sign_in("operator", "/api/v1/docs/")[1] == "/api/v1/docs/"


def test_a_next_elsewhere_is_ignored(shopper: User) -> None:
    assert _sign_in("shopper", "https://evil.example/")[1] == "/escrow/envelopes/"
