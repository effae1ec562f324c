"""The `ops` group opens every page of the operations admin (issue 13: the demo `ops` user got
403 on /admin/receipts/ and could not revoke a token), and nothing that makes staff."""

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken, User
from accounts.services import api_token_issue, demo_users_ensure
from core.models import AuditEvent

# The apps whose admin pages are the operations console's.
VOUCH_APPS = {
    "core",
    "envelopes",
    "verification",
    "disputes",
    "receipts",
    "reconciliation",
    "django_celery_beat",
}


@pytest.fixture
def ops(db: None) -> Client:
    demo_users_ensure(
        users={"opsie": {"password": "pw-opsie-123", "email": "opsie@example.com", "staff": True}}
    )
    user = User.objects.get(username="opsie")
    assert not user.is_superuser
    assert not user.user_permissions.exists()
    client = Client()
    client.force_login(user)
    return client


def _changelists() -> list[str]:
    found = [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
        if model._meta.app_label in VOUCH_APPS
    ]
    found.append(reverse("admin:accounts_apitoken_changelist"))
    return found


def test_ops_open_every_admin_list_of_the_vouch_apps(ops: Client) -> None:
    pages = _changelists()
    # Every Vouch app is there (a model registered later is covered by the loop).
    assert {page.split("/")[2] for page in pages} >= VOUCH_APPS | {"accounts"}
    assert "/admin/receipts/receipt/" in pages
    for page in pages:
        assert ops.get(page).status_code == 200, page
    for app in VOUCH_APPS:
        assert ops.get(f"/admin/{app}/").status_code == 200, app


def test_ops_cannot_grant_staff_or_groups(ops: Client) -> None:
    user = User.objects.get(username="opsie")
    assert not user.has_perm("accounts.change_user")
    assert not user.has_perm("accounts.add_user")
    assert not user.has_perm("auth.change_group")
    assert not user.has_perm("accounts.add_apitoken")
    assert not user.has_perm("accounts.delete_apitoken")
    assert ops.get(reverse("admin:accounts_user_changelist")).status_code == 403
    assert ops.get(reverse("admin:auth_group_changelist")).status_code == 403
    target = User.objects.create_user("target", "t@example.com", "pw-target-123")
    ops.post(
        reverse("admin:accounts_user_change", args=[target.pk]),
        {"username": "target", "is_staff": "on", "is_superuser": "on"},
    )
    target.refresh_from_db()
    assert not target.is_staff
    assert not target.is_superuser


def test_ops_revoke_a_token_from_the_admin(ops: Client) -> None:
    buyer = User.objects.create_user("tok-owner", "tok@example.com", "pw-tok-123")
    token, raw = api_token_issue(user=buyer, name="laptop")
    client = Client()
    assert client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    page = reverse("admin:accounts_apitoken_changelist")
    assert "Revoke the selected tokens" in ops.get(page).content.decode()
    response = ops.post(page, {"action": "revoke", "_selected_action": [str(token.pk)]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEvent.objects.filter(action="api_token.revoke", target_id=str(token.pk)).exists()
    assert client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_revoking_needs_the_change_permission(db: None) -> None:
    viewer = User.objects.create_user("viewer", "v@example.com", "pw-viewer-123", is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    token, _ = api_token_issue(user=viewer, name="x")
    client = Client()
    client.force_login(viewer)
    page = reverse("admin:accounts_apitoken_changelist")
    assert client.get(page).status_code == 200
    client.post(page, {"action": "revoke", "_selected_action": [str(token.pk)]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
