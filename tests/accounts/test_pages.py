"""The public pages (allauth's and the home page) share the operations admin's stylesheet and
header, and show Django's messages."""

from typing import Any

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.urls import reverse

from accounts.models import User

STYLESHEET = '<link rel="stylesheet" href="/static/admin/css/base.css">'
PASSWORD = "pw-pages-user-123"


@pytest.fixture
def user(db: None) -> User:
    return User.objects.create_user("pagey", "pagey@example.com", PASSWORD)


def _assert_styled(response: Any, path: str) -> str:
    assert response.status_code == 200, (path, response.status_code)
    page = response.content.decode()
    assert STYLESHEET in page, path
    assert 'id="site-name"' in page, path
    return page


def test_signed_out_pages_render_in_the_admins_look(db: None, user: User) -> None:
    from allauth.account.utils import user_pk_to_url_str

    client = Client()
    key = default_token_generator.make_token(user)
    uidb36 = user_pk_to_url_str(user)
    for path in [
        "/",
        reverse("account_login"),
        reverse("account_signup"),
        reverse("account_reset_password"),
        reverse("account_reset_password_done"),
        reverse("account_reset_password_from_key", kwargs={"uidb36": uidb36, "key": "bad-key"}),
        reverse("account_reset_password_from_key_done"),
        reverse("account_email_verification_sent"),
        reverse("account_confirm_email", args=["not-a-key"]),
    ]:
        _assert_styled(client.get(path), path)
    # A valid reset link: allauth redirects to the keyless form, which renders the same way.
    valid = reverse("account_reset_password_from_key", kwargs={"uidb36": uidb36, "key": key})
    _assert_styled(client.get(valid, follow=True), valid)


def test_signed_in_pages_render_in_the_admins_look(user: User) -> None:
    client = Client()
    client.force_login(user)
    for path in [
        "/",
        reverse("account_logout"),
        reverse("account_change_password"),
        reverse("account_email"),
    ]:
        _assert_styled(client.get(path), path)
    user.set_unusable_password()
    user.save()
    client.force_login(user)
    _assert_styled(client.get(reverse("account_set_password")), "set password")


def test_the_buyers_landing_page_shows_the_messages_of_signing_in(user: User) -> None:
    """A buyer lands on their envelopes (issue 27), which shows allauth's message once."""
    client = Client()
    response = client.post(
        reverse("account_login"), {"login": "pagey", "password": PASSWORD}, follow=True
    )
    page = _assert_styled(response, "/escrow/envelopes/")
    assert response.redirect_chain[-1][0] == "/escrow/envelopes/"
    assert 'class="messagelist"' in page
    assert "Successfully signed in as pagey." in page
    # Shown once: the next page has no message left.
    assert "Successfully signed in" not in client.get("/escrow/envelopes/").content.decode()


def test_the_closed_sign_up_page_renders_in_the_admins_look(db: None, settings: Any) -> None:
    settings.VOUCH_BUYER_SIGNUP = False
    page = _assert_styled(Client().get(reverse("account_signup")), "signup closed")
    assert "Sign Up Closed" in page
