"""`make run` creates its demo users at every start (`demo_users_ensure`): a restart must not sign
them out. Django ends a user's sessions when the password hash changes, and a fresh salt changes
it, so the password is set only when the user is new or the password differs."""

from typing import Any

from django.test import Client

from accounts.models import User
from accounts.services import demo_users_ensure

USERS: dict[str, dict[str, Any]] = {
    "ops": {"password": "vouch-ops-demo", "email": "ops@example.com", "staff": True},
    "buyer": {"password": "vouch-buyer-demo", "email": "buyer@example.com", "staff": False},
    "robot": {"password": None, "email": "robot@example.com", "staff": False},
}


def _signed_in(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    assert client.get("/api/v1/me").status_code == 200
    return client


def test_a_second_start_keeps_the_demo_users_signed_in(db: None) -> None:
    demo_users_ensure(users=USERS)
    clients = {name: _signed_in(name) for name in USERS}
    hashes = dict(User.objects.values_list("username", "password"))

    demo_users_ensure(users=USERS)  # the next `make run`

    assert dict(User.objects.values_list("username", "password")) == hashes
    for name, client in clients.items():
        assert client.get("/api/v1/me").status_code == 200, f"{name} was signed out"


def test_a_changed_password_is_set_and_ends_that_users_sessions(db: None) -> None:
    demo_users_ensure(users=USERS)
    buyer, ops = _signed_in("buyer"), _signed_in("ops")

    demo_users_ensure(users={**USERS, "buyer": {**USERS["buyer"], "password": "a-new-one"}})

    assert User.objects.get(username="buyer").check_password("a-new-one")
    assert buyer.get("/api/v1/me").status_code in (401, 403)
    assert ops.get("/api/v1/me").status_code == 200
