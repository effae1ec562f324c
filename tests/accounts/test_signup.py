"""Buyers sign up through allauth when VOUCH_BUYER_SIGNUP is on; the form never makes staff."""

from typing import Any

from django.contrib.auth.models import Group, Permission
from django.core import mail
from django.test import Client

from accounts.models import User
from accounts.selectors import user_email_verified

SIGNUP = "/accounts/signup/"


def _form(username: str, **extra: Any) -> dict[str, Any]:
    return {
        "username": username,
        "email": f"{username}@example.com",
        "password1": "a-long-buyer-passphrase-1",
        "password2": "a-long-buyer-passphrase-1",
        **extra,
    }


def test_a_buyer_signs_up_and_is_sent_a_confirmation(db: None, settings: Any) -> None:
    settings.VOUCH_BUYER_SIGNUP = True
    client = Client()
    assert client.get(SIGNUP).status_code == 200
    response = client.post(SIGNUP, _form("newbuyer"))
    assert response.status_code == 302, response.content.decode()[:2000]
    user = User.objects.get(username="newbuyer")
    assert (user.is_staff, user.is_superuser) == (False, False)
    assert not user_email_verified(user=user)
    # Signed in at once (verification is optional locally), and asked to confirm by e-mail.
    assert client.get("/api/v1/me").json()["data"]["username"] == "newbuyer"
    (message,) = mail.outbox
    assert message.to == ["newbuyer@example.com"]
    assert "/accounts/confirm-email/" in message.body


def test_sign_up_never_makes_staff_whatever_is_posted(db: None, settings: Any) -> None:
    settings.VOUCH_BUYER_SIGNUP = True
    ops = Group.objects.create(name="ops")
    ops.permissions.add(Permission.objects.get(codename="approve_packet"))
    response = Client().post(
        SIGNUP,
        _form(
            "sneaky",
            is_staff="on",
            is_superuser="on",
            groups=[str(ops.pk)],
            user_permissions=[str(Permission.objects.get(codename="add_debit").pk)],
        ),
    )
    assert response.status_code == 302
    user = User.objects.get(username="sneaky")
    assert (user.is_staff, user.is_superuser) == (False, False)
    assert not user.groups.exists()
    assert not user.user_permissions.exists()
    assert not user.has_perm("disputes.approve_packet")
    assert Client().get("/admin/", follow=False).status_code == 302


def test_sign_up_closed_makes_no_user(db: None, settings: Any) -> None:
    settings.VOUCH_BUYER_SIGNUP = False
    client = Client()
    page = client.get(SIGNUP)
    assert "Sign Up Closed" in page.content.decode()
    client.post(SIGNUP, _form("latecomer"))
    assert not User.objects.filter(username="latecomer").exists()
    assert not mail.outbox
    home = client.get("/").content.decode()
    assert SIGNUP not in home
    settings.VOUCH_BUYER_SIGNUP = True
    assert SIGNUP in client.get("/").content.decode()


def test_the_adapter_refuses_staff_even_from_a_model_form_path(db: None, settings: Any) -> None:
    """The adapter itself (not only the form's fields) resets the flags."""
    from django.test import RequestFactory

    from accounts.adapter import AccountAdapter

    class _Form:
        cleaned_data = {"username": "direct", "email": "d@example.com", "password1": "pw-x-12345"}

    user = User(username="direct", is_staff=True, is_superuser=True)
    saved = AccountAdapter().save_user(RequestFactory().post(SIGNUP), user, _Form())
    saved.refresh_from_db()
    assert (saved.is_staff, saved.is_superuser) == (False, False)
