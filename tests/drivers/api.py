from typing import Any

import pytest
import stripe
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue, email_address_verify
from stripe_sandbox.client import SandboxControl


class Api:
    """A logged-in browser session against the API: CSRF token included, as a real client sends.
    The user's e-mail address is verified first, as moving money needs (`verified=False`: left
    as it is)."""

    def __init__(self, user: User, *, verified: bool = True) -> None:
        if verified:
            email_address_verify(user=user, email=user.email or f"{user.username}@example.test")
        self.user = user
        self.client = APIClient(enforce_csrf_checks=True)
        self.client.force_login(user)
        self.client.get("/api/v1/me")
        self.csrf = self.client.cookies["csrftoken"].value

    def post(
        self, path: str, body: Any = None, *, key: str | None = None, csrf: bool = True
    ) -> Any:
        headers = {}
        if csrf:
            headers["HTTP_X_CSRFTOKEN"] = self.csrf
        if key is not None:
            headers["HTTP_IDEMPOTENCY_KEY"] = key
        return self.client.post(path, body if body is not None else {}, format="json", **headers)

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def create(self, amount_micro: int = 10_000_000, pm: str = "pm_card_visa") -> dict[str, Any]:
        response = self.post(
            "/api/v1/escrow/envelopes", {"amount_micro": amount_micro, "payment_method": pm}
        )
        assert response.status_code == 201, response.content
        return response.json()["data"]

    def top_up(
        self, envelope_id: str, amount_micro: int, pm: str = "pm_card_visa"
    ) -> dict[str, Any]:
        response = self.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
            {"amount_micro": amount_micro, "payment_method": pm},
        )
        assert response.status_code == 201, response.content
        return response.json()["data"]


@pytest.fixture
def stripe_at_sandbox(sandbox: SandboxControl, settings: Any) -> SandboxControl:
    settings.STRIPE_API_BASE = sandbox.url
    return sandbox


@pytest.fixture
def sdk(stripe_at_sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": stripe_at_sandbox.url}, max_network_retries=0
    )


@pytest.fixture
def alice(db: None, stripe_at_sandbox: SandboxControl) -> Api:
    return Api(User.objects.create_user("alice", "alice@example.com", "pw-alice-123"))


@pytest.fixture
def bob(db: None, stripe_at_sandbox: SandboxControl) -> Api:
    return Api(User.objects.create_user("bob", "bob@example.com", "pw-bob-123"))


@pytest.fixture
def staff_api(db: None, stripe_at_sandbox: SandboxControl) -> Api:
    user = User.objects.create_user("sam", "sam@example.com", "pw-sam-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_debit"))
    return Api(User.objects.get(pk=user.pk))


@pytest.fixture
def alice_token(alice: Api) -> APIClient:
    _, raw = api_token_issue(user=alice.user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client
