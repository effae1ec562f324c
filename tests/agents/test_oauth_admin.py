"""The agent surface in the operations admin (SPEC §16): ops staff register OAuth clients (the
code grant only), see the tokens issued and revoke them (a revoked token authenticates no more,
and the revocation is audited), and read refund requests. The `ops` group holds exactly that."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, RefreshToken

from accounts.models import User
from accounts.services import demo_users_ensure
from agents.models import RefundRequest
from agents.oauth.tokens import TokenRefused, bearer_authenticate
from core.models import AuditEvent
from envelopes.models import Envelope
from tests.agents.oauth import (
    MCP,
    REDIRECT_URI,
    authorize_query,
    client_register,
    form_fields,
    issue_token,
    pkce_pair,
    redirect_params,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(db: None) -> Client:
    """A member of the `ops` group, as `make run` and seed_demo make one (not a superuser)."""
    demo_users_ensure(
        users={"opsie": {"password": "pw-opsie-123", "email": "opsie@example.com", "staff": True}}
    )
    client = Client()
    client.force_login(User.objects.get(username="opsie"))
    return client


def _tokens_for(user: User, app: Application) -> dict[str, Any]:
    """An access and a refresh token issued through the real flow."""
    browser = Client()
    browser.force_login(user)
    verifier, challenge = pkce_pair()
    page = browser.get(f"/o/authorize/?{authorize_query(app, challenge)}")
    fields = {**form_fields(page.content.decode()), "allow": "Allow"}
    code = redirect_params(browser.post("/o/authorize/", fields)["Location"])["code"]
    response = Client().post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": app.client_id,
            "code_verifier": verifier,
        },
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _refresh(app: Application, refresh_token: str) -> int:
    return int(
        Client()
        .post(
            "/o/token/",
            {
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": app.client_id,
            },
        )
        .status_code
    )


def test_ops_open_the_agent_pages_and_django_oauth_toolkits_others_are_gone(ops: Client) -> None:
    for name in (
        "oauth2_provider_application",
        "oauth2_provider_accesstoken",
        "oauth2_provider_refreshtoken",
        "agents_refundrequest",
    ):
        assert ops.get(reverse(f"admin:{name}_changelist")).status_code == 200, name
    assert ops.get(reverse("admin:oauth2_provider_application_add")).status_code == 200
    for gone in ("/admin/oauth2_provider/grant/", "/admin/oauth2_provider/idtoken/"):
        assert ops.get(gone).status_code == 404, gone


def test_ops_revoke_an_access_token_and_it_no_longer_authenticates(
    ops: Client, buyer: User
) -> None:
    app = client_register()
    tokens = _tokens_for(buyer, app)
    bearer_authenticate(raw=tokens["access_token"], resource=MCP)
    token = AccessToken.objects.get()
    page = reverse("admin:oauth2_provider_accesstoken_changelist")
    listing = ops.get(page).content.decode()
    assert "Revoke the selected access tokens" in listing
    assert MCP in listing
    assert "delete_selected" not in listing

    response = ops.post(page, {"action": "revoke", "_selected_action": [str(token.pk)]})
    assert response.status_code == 302
    with pytest.raises(TokenRefused) as refused:
        bearer_authenticate(raw=tokens["access_token"], resource=MCP)
    assert refused.value.reason == "unknown"
    # Its refresh token went with it.
    assert _refresh(app, tokens["refresh_token"]) == 400
    event = AuditEvent.objects.get(action="oauth_access_token.revoke")
    assert event.actor_label == "opsie"
    assert event.target_id == str(token.pk)
    assert event.details == {
        "user": "alice",
        "client_id": app.client_id,
        "resource": MCP,
        "scope": "escrow:read escrow:refund_request",
    }


def test_ops_revoke_a_refresh_token_and_neither_token_works(ops: Client, buyer: User) -> None:
    app = client_register()
    tokens = _tokens_for(buyer, app)
    refresh = RefreshToken.objects.get()
    page = reverse("admin:oauth2_provider_refreshtoken_changelist")
    assert "Revoke the selected refresh tokens" in ops.get(page).content.decode()
    ops.post(page, {"action": "revoke", "_selected_action": [str(refresh.pk)]})
    refresh.refresh_from_db()
    assert refresh.revoked is not None
    assert _refresh(app, tokens["refresh_token"]) == 400
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=tokens["access_token"], resource=MCP)
    assert AuditEvent.objects.filter(
        action="oauth_refresh_token.revoke", target_id=str(refresh.pk)
    ).exists()


def test_ops_cannot_delete_tokens_and_a_viewer_cannot_revoke(ops: Client, buyer: User) -> None:
    """Rows are revoked, never deleted (a deleted refresh token would defeat reuse
    protection); revoking needs the change permission, which view-only staff lack."""
    raw = issue_token(buyer)
    token = AccessToken.objects.get()
    delete = reverse("admin:oauth2_provider_accesstoken_delete", args=[token.pk])
    assert ops.post(delete, {"post": "yes"}).status_code == 403
    assert AccessToken.objects.filter(pk=token.pk).exists()

    viewer = User.objects.create_user("viewer", "v@example.com", "pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_accesstoken"))
    client = Client()
    client.force_login(viewer)
    page = reverse("admin:oauth2_provider_accesstoken_changelist")
    assert client.get(page).status_code == 200
    client.post(page, {"action": "revoke", "_selected_action": [str(token.pk)]})
    bearer_authenticate(raw=raw, resource=MCP)


def test_the_ops_group_holds_oauth_client_and_token_permissions_but_no_deletion(
    ops: Client,
) -> None:
    user = User.objects.get(username="opsie")
    for perm in (
        "oauth2_provider.add_application",
        "oauth2_provider.change_application",
        "oauth2_provider.view_application",
        "oauth2_provider.view_accesstoken",
        "oauth2_provider.change_accesstoken",
        "oauth2_provider.view_refreshtoken",
        "oauth2_provider.change_refreshtoken",
        "agents.view_refundrequest",
    ):
        assert user.has_perm(perm), perm
    for perm in (
        "oauth2_provider.delete_accesstoken",
        "oauth2_provider.delete_refreshtoken",
        "oauth2_provider.delete_application",
        "oauth2_provider.add_accesstoken",
        "accounts.change_user",
        "auth.change_group",
    ):
        assert not user.has_perm(perm), perm


def _application_form(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Claude Desktop",
        "client_id": "claude-desktop-test",
        "client_type": Application.CLIENT_PUBLIC,
        "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
        "redirect_uris": "http://127.0.0.1/callback https://assistant.example/oauth/callback",
        "client_secret": "",
        "allowed_origins": "",
        "user": "",
    }
    data.update(overrides)
    return data


def test_ops_register_a_client_in_the_admin_and_it_can_ask_for_consent(
    ops: Client, buyer: User
) -> None:
    add = reverse("admin:oauth2_provider_application_add")
    page = ops.get(add).content.decode()
    assert "Authorization code (with PKCE S256)" in page
    assert "Client credentials" not in page
    assert "skip_authorization" not in page
    response = ops.post(add, _application_form())
    assert response.status_code == 302, response.content.decode()
    app = Application.objects.get(client_id="claude-desktop-test")
    assert app.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE

    browser = Client()
    browser.force_login(buyer)
    _, challenge = pkce_pair()
    consent = browser.get(f"/o/authorize/?{authorize_query(app, challenge)}")
    assert consent.status_code == 200
    assert "Claude Desktop" in consent.content.decode()


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"authorization_grant_type": Application.GRANT_CLIENT_CREDENTIALS}, "Select a valid"),
        ({"authorization_grant_type": Application.GRANT_PASSWORD}, "Select a valid"),
        ({"authorization_grant_type": Application.GRANT_IMPLICIT}, "Select a valid"),
        (
            {"redirect_uris": "http://assistant.example/callback"},
            "is not a loopback address; use https",
        ),
    ],
)
def test_the_admin_refuses_another_grant_type_or_a_remote_http_redirect(
    ops: Client, overrides: dict[str, str], error: str
) -> None:
    response = ops.post(
        reverse("admin:oauth2_provider_application_add"), _application_form(**overrides)
    )
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Application.objects.exists()


def test_ops_read_refund_requests_with_their_status_and_search_by_email(
    ops: Client, buyer: User
) -> None:
    envelope = Envelope.objects.create(owner=buyer)
    pending = RefundRequest.objects.create(
        owner=buyer,
        envelope=envelope,
        preview={},
        expires_at=timezone.now() + timedelta(minutes=15),
    )
    expired = RefundRequest.objects.create(
        owner=buyer, envelope=envelope, preview={}, expires_at=timezone.now() - timedelta(minutes=1)
    )
    page = reverse("admin:agents_refundrequest_changelist")
    listing = ops.get(page).content.decode()
    assert "pending_confirmation" in listing
    assert "expired" in listing
    found = ops.get(page, {"q": "alice@example.com"}).content.decode()
    assert pending.public_id in found
    assert expired.public_id in found
    by_id = ops.get(page, {"q": pending.public_id}).content.decode()
    assert pending.public_id in by_id
    assert expired.public_id not in by_id
    nobody = ops.get(page, {"q": "nobody@example.com"}).content.decode()
    assert pending.public_id not in nobody
    change = reverse("admin:agents_refundrequest_change", args=[pending.pk])
    assert ops.get(change).status_code == 200
    assert ops.post(change, {"status": "confirmed"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == RefundRequest.Status.PENDING
