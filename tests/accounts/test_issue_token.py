from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import ApiToken, User
from core.models import AuditEvent

pytestmark = pytest.mark.django_db


def _issue(username: str) -> str:
    out = StringIO()
    call_command("issue_token", username, stdout=out)
    return out.getvalue()


def test_prints_only_the_token_which_then_authenticates(buyer: User) -> None:
    output = _issue("alice")
    lines = output.splitlines()
    assert len(lines) == 1
    raw = lines[0]
    assert raw.startswith("vch_")
    assert len(raw) > 40
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/me").json()["data"]["username"] == "alice"


def test_token_is_stored_hashed_only(buyer: User) -> None:
    raw = _issue("alice").strip()
    token = ApiToken.objects.get()
    assert token.digest != raw
    assert len(token.digest) == 64
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_apitoken")
        row = cursor.fetchone()
    assert not [column for column in row if isinstance(column, str) and raw in column]
    assert raw[:12] == token.prefix
    assert AuditEvent.objects.filter(action="api_token.issue", actor=buyer).count() == 1


def test_each_token_is_new(buyer: User) -> None:
    assert _issue("alice") != _issue("alice")
    assert ApiToken.objects.count() == 2


def test_unknown_or_inactive_user_is_a_clear_error(buyer: User) -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        _issue("nobody")
    buyer.is_active = False
    buyer.save()
    with pytest.raises(CommandError, match="inactive"):
        _issue("alice")
    assert ApiToken.objects.count() == 0
