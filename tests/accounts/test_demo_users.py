"""`make run`'s demo users (config.settings.local, `manage.py seed_demo`): `ops` and `lead` are
staff in the `ops` group (each approves and files), `buyer` is not, and every one's e-mail is
verified so the demo buyer moves money at once."""

import ast
import io
from pathlib import Path
from typing import Any

import pytest
from allauth.account.models import EmailAddress
from django.core.management import call_command

from accounts.models import User
from accounts.selectors import user_email_verified

LOCAL_SETTINGS = Path(__file__).resolve().parents[2] / "config" / "settings" / "local.py"


def _local_demo_users() -> dict[str, Any]:
    """VOUCH_DEMO_USERS as config/settings/local.py declares it (a literal; importing the module
    would configure a local run's folders)."""
    for node in ast.parse(LOCAL_SETTINGS.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "VOUCH_DEMO_USERS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError("VOUCH_DEMO_USERS not found in local.py")


def test_seed_demo_makes_two_ops_and_a_buyer_and_prints_them(db: None, settings: Any) -> None:
    settings.DEBUG = True
    settings.VOUCH_DEMO_USERS = _local_demo_users()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=io.StringIO())  # idempotent
    printed = out.getvalue()
    for username, spec in settings.VOUCH_DEMO_USERS.items():
        assert f"username {username}" in printed
        assert f"password {spec['password']}" in printed
    assert set(settings.VOUCH_DEMO_USERS) == {"ops", "lead", "buyer"}
    for name in ("ops", "lead"):
        user = User.objects.get(username=name)
        assert user.is_staff
        assert not user.is_superuser
        assert list(user.groups.values_list("name", flat=True)) == ["ops"]
        assert user.has_perm("disputes.approve_packet")
        assert user.has_perm("disputes.file_packet")
        assert user.check_password(settings.VOUCH_DEMO_USERS[name]["password"])
    buyer = User.objects.get(username="buyer")
    assert not buyer.is_staff
    assert not buyer.groups.exists()
    for user in User.objects.filter(username__in=["ops", "lead", "buyer"]):
        assert user_email_verified(user=user)
        (address,) = EmailAddress.objects.filter(user=user)
        assert (address.email, address.verified, address.primary) == (user.email, True, True)


def test_seed_demo_refuses_outside_a_local_run(db: None, settings: Any) -> None:
    settings.DEBUG = False
    settings.VOUCH_DEMO_USERS = _local_demo_users()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("seed_demo", stdout=io.StringIO())
    assert not User.objects.filter(username="ops").exists()
