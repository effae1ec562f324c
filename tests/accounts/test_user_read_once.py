"""Issue 15: a session's user is read with whether its e-mail is verified, in one SELECT
(accounts.backends.AccountBackend), so that `EmailVerified` on a money route asks nothing more of
the database; new sessions, however made, name that backend, and the sessions made before it
(naming Django's ModelBackend or allauth's backend) still load. The answer is the one read at the
start of the request: an address un-verified between two requests refuses the second."""

import itertools
from typing import Any

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import BACKEND_SESSION_KEY
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from accounts.selectors import EMAIL_VERIFIED_ATTR, user_with_email_verified
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

OURS = "accounts.backends.AccountBackend"
DJANGO_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
ALLAUTH_BACKEND = "allauth.account.auth_backends.AuthenticationBackend"
ENVELOPES = "/api/v1/escrow/envelopes"
FUNDING = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
_addresses = itertools.count(1)


def _relogin(api: Api, backend: str) -> Api:
    """The same browser, logged in again as a session made by `backend` names it."""
    api.client.force_login(api.user, backend=backend)
    assert api.client.session[BACKEND_SESSION_KEY] == backend
    api.client.get("/api/v1/me")
    api.csrf = api.client.cookies["csrftoken"].value
    return api


def _from_email_addresses(queries: list[dict[str, Any]]) -> list[str]:
    """The statements that read allauth's addresses on their own (not as a subquery)."""
    return [q["sql"] for q in queries if 'FROM "account_emailaddress"' in q["sql"].split("(")[0]]


def _refund_queries(api: Api, envelope_id: str, key: str) -> list[dict[str, Any]]:
    with CaptureQueriesContext(connection) as captured:
        response = api.post(
            f"{ENVELOPES}/{envelope_id}/refund", {"amount_micro": 1_000_000}, key=key
        )
    assert response.status_code == 200, response.content
    return captured.captured_queries


def test_a_money_post_reads_the_user_and_the_verified_email_in_one_query(
    alice: Api, bob: Api
) -> None:
    """The same refund by two buyers: alice's session (made now) names AccountBackend; bob's is
    made by Django's ModelBackend, as every session was before, and reads his addresses apart."""
    assert alice.client.session[BACKEND_SESSION_KEY] == OURS
    _relogin(bob, DJANGO_MODEL_BACKEND)
    counted: dict[str, list[dict[str, Any]]] = {}
    for name, api in (("alice", alice), ("bob", bob)):
        envelope_id = api.create(10_000_000)["envelope_id"]
        _refund_queries(api, envelope_id, f"{name}-warm")  # both paths warm alike
        counted[name] = _refund_queries(api, envelope_id, f"{name}-counted")

    ours, before = counted["alice"], counted["bob"]
    assert len(ours) == len(before) - 1
    assert len(_from_email_addresses(before)) == 1
    assert _from_email_addresses(ours) == []
    (user_read,) = [q["sql"] for q in ours if '"account_emailaddress"' in q["sql"]]
    assert 'FROM "accounts_user"' in user_read
    assert "EXISTS" in user_read


@pytest.mark.parametrize("backend", [OURS, DJANGO_MODEL_BACKEND, ALLAUTH_BACKEND])
def test_a_session_of_every_listed_backend_loads_and_moves_money(alice: Api, backend: str) -> None:
    _relogin(alice, backend)
    me = alice.get("/api/v1/me")
    assert me.status_code == 200
    assert me.json()["data"]["username"] == "alice"
    assert me.json()["data"]["email_verified"] is True
    assert alice.post(ENVELOPES, FUNDING).status_code == 201


def test_sign_up_and_allauth_logins_make_sessions_of_this_backend(db: None) -> None:
    # A name of its own: allauth limits confirmation mails per address in the shared cache.
    signup = Client(REMOTE_ADDR=f"203.0.113.{next(_addresses)}")
    response = signup.post(
        "/accounts/signup/",
        {
            "username": "backend-newcomer",
            "email": "backend-newcomer@example.com",
            "password1": "a-long-buyer-passphrase-1",
            "password2": "a-long-buyer-passphrase-1",
        },
    )
    assert response.status_code == 302
    assert signup.session[BACKEND_SESSION_KEY] == OURS
    for login in ("backend-newcomer", "backend-newcomer@example.com"):  # by username, by e-mail
        browser = Client(REMOTE_ADDR=f"203.0.113.{next(_addresses)}")
        response = browser.post(
            "/accounts/login/", {"login": login, "password": "a-long-buyer-passphrase-1"}
        )
        assert response.status_code == 302, login
        assert browser.session[BACKEND_SESSION_KEY] == OURS
        assert browser.get("/api/v1/me").json()["data"]["username"] == "backend-newcomer"


@pytest.mark.parametrize("backend", [OURS, DJANGO_MODEL_BACKEND])
def test_an_unverified_user_moves_no_money(db: None, stripe_at_sandbox: Any, backend: str) -> None:
    user = User.objects.create_user("dora", "dora@example.com", "pw-dora-123")
    EmailAddress.objects.create(user=user, email=user.email, verified=False, primary=True)
    api = _relogin(Api(user, verified=False), backend)
    response = api.post(ENVELOPES, FUNDING, key="unverified")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "email_unverified"
    assert api.get("/api/v1/me").json()["data"]["email_verified"] is False


def test_an_address_unverified_between_requests_is_refused_on_the_next(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    EmailAddress.objects.filter(user=alice.user).update(verified=False)
    refused = alice.post(f"{ENVELOPES}/{envelope_id}/refund", {"amount_micro": 1_000_000})
    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["code"] == "email_unverified"
    assert alice.get("/api/v1/me").json()["data"]["email_verified"] is False
    # Verified again: the next request moves money.
    EmailAddress.objects.filter(user=alice.user).update(verified=True)
    allowed = alice.post(f"{ENVELOPES}/{envelope_id}/refund", {"amount_micro": 1_000_000})
    assert allowed.status_code == 200, allowed.content


def test_an_inactive_user_is_not_loaded(alice: Api) -> None:
    """`user_can_authenticate` still holds for a session's user: deactivated, logged out."""
    User.objects.filter(pk=alice.user.pk).update(is_active=False)
    assert alice.get("/api/v1/me").status_code in (401, 403)


def test_the_session_user_read_in_plain_sql_is_the_user_the_orm_reads(alice: Api) -> None:
    """`user_with_email_verified` (the backend's read, plain SQL) gives every field as the ORM
    does, with the verified flag; an unknown or malformed id is no user."""
    read = user_with_email_verified(pk=alice.user.pk)
    by_orm = User.objects.get(pk=alice.user.pk)
    assert read is not None
    for field in User._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(by_orm, field.attname), field.name
    assert getattr(read, EMAIL_VERIFIED_ATTR) is True
    assert read.get_session_auth_hash() == by_orm.get_session_auth_hash()

    EmailAddress.objects.filter(user=alice.user).update(verified=False)
    unverified = user_with_email_verified(pk=str(alice.user.pk))  # as a session stores it
    assert unverified is not None
    assert getattr(unverified, EMAIL_VERIFIED_ATTR) is False

    assert user_with_email_verified(pk=alice.user.pk + 1000) is None
    assert user_with_email_verified(pk="not-a-number") is None
