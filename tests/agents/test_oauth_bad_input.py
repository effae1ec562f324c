"""Bad input at /o/* (issue 26, SPEC §16): every request an adversarial probe sent is answered
4xx, never with a server error or a traceback."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import User

pytestmark = pytest.mark.django_db

CASES = [
    ("get", "/o/token/", {}),
    ("post", "/o/token/", {}),
    ("post", "/o/token/", {"grant_type": "authorization_code"}),
    ("post", "/o/token/", {"grant_type": "refresh_token"}),
    ("post", "/o/token/", {"grant_type": "x" * 5000, "client_id": "y" * 5000}),
    ("post", "/o/token/", {"grant_type": "authorization_code", "client_id": "nope", "code": "c"}),
    ("post", "/o/token/", {"grant_type": "authorization_code", "client_id": "é" * 300}),
    ("post", "/o/token/", {"grant_type": "password", "username": "u", "password": "p"}),
    ("post", "/o/token/", {"grant_type": "client_credentials", "client_id": "nope"}),
    ("post", "/o/revoke_token/", {}),
    ("get", "/o/authorize/", {}),
    ("get", "/o/authorize/", {"client_id": "x" * 300}),
    ("get", "/o/authorize/", {"client_id": "https://" + "x" * 300}),
    ("get", "/o/authorize/", {"client_id": "https://[::1/x"}),
    ("get", "/o/authorize/", {"response_type": "token", "client_id": "nope"}),
    ("post", "/o/authorize/", {}),
    ("post", "/o/register/", {}),
    ("put", "/o/register/", {}),
]


@pytest.mark.parametrize(("method", "path", "data"), CASES)
def test_bad_input_at_o_is_a_4xx_without_a_traceback(
    buyer: User, method: str, path: str, data: dict[str, Any]
) -> None:
    client = Client()
    client.force_login(buyer)
    response = getattr(client, method)(path, data)
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert b"Traceback" not in response.content


def test_a_revocation_by_an_unknown_client_is_401() -> None:
    response = Client().post("/o/revoke_token/", {"token": "x", "client_id": "nope"})
    assert response.status_code == 401, response.content  # an unknown client is not authenticated
