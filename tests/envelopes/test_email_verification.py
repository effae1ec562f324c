"""Money moves only for a confirmed e-mail address (issue 13). A buyer who signs up through the
allauth form may sign in and read at once; creating, funding, topping up and refunding answer
403 `email_unverified` until the confirmation link is followed: checked after authentication,
the method, the session requirement and permissions, before any lookup (the answer is the same
for a missing id and another buyer's envelope), and never stored under an Idempotency-Key."""

import re
from typing import Any

from django.core import mail
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue
from envelopes.models import Envelope, RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

ENVELOPES = "/api/v1/escrow/envelopes"
FUNDING = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}


def _sign_up(username: str) -> Api:
    client = APIClient(enforce_csrf_checks=True)
    page = client.get("/accounts/signup/")
    assert page.status_code == 200
    response = client.post(
        "/accounts/signup/",
        {
            "username": username,
            "email": f"{username}@example.com",
            "password1": "a-long-buyer-passphrase-1",
            "password2": "a-long-buyer-passphrase-1",
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        },
    )
    assert response.status_code == 302, response.content.decode()[:1000]
    api = Api.__new__(Api)  # the signed-up session itself, not a forced login
    api.user = User.objects.get(username=username)
    api.client = client
    client.get("/api/v1/me")
    api.csrf = client.cookies["csrftoken"].value
    return api


def _refused(response: Any) -> None:
    assert response.status_code == 403, response.content
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == "email_unverified"


def _provider_calls(sandbox: SandboxControl) -> int:
    return sum(sandbox.state()["requests"].values())


def _confirm_from_the_mail(api: Api) -> None:
    (message,) = [m for m in mail.outbox if m.to == [api.user.email]]
    (link,) = re.findall(r"https?://[^\s]+/accounts/confirm-email/[^\s/]+/", message.body)
    path = link.split("://", 1)[1].split("/", 1)[1]
    page = api.client.get("/" + path)
    assert page.status_code == 200
    response = api.client.post("/" + path, {"csrfmiddlewaretoken": api.csrf})
    assert response.status_code == 302


def test_a_new_buyer_moves_money_only_after_confirming_the_address(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    buyer = _sign_up("newcomer")
    calls = _provider_calls(stripe_at_sandbox)
    # Reads are allowed.
    assert buyer.get(ENVELOPES).status_code == 200
    assert buyer.get("/api/v1/me").json()["data"]["username"] == "newcomer"
    # Creating and funding is refused, with a key, and nothing is made anywhere.
    _refused(buyer.post(ENVELOPES, FUNDING, key="first-envelope"))
    _refused(buyer.post(f"/api/{ENVELOPES.removeprefix('/api/v1/')}", FUNDING))
    assert not Envelope.objects.exists()
    assert _provider_calls(stripe_at_sandbox) == calls
    # The link in the e-mail confirms the address; the same key then runs (it stored nothing).
    _confirm_from_the_mail(buyer)
    created = buyer.post(ENVELOPES, FUNDING, key="first-envelope")
    assert created.status_code == 201, created.content
    assert "Idempotent-Replayed" not in created
    assert Envelope.objects.filter(owner=buyer.user).count() == 1
    assert _provider_calls(stripe_at_sandbox) > calls


def test_no_money_route_reveals_an_envelope_to_an_unverified_caller(
    db: None, alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    own_id = envelope_id  # alice's; the newcomer also probes a missing one
    newcomer = _sign_up("prober")
    calls = _provider_calls(stripe_at_sandbox)
    answers = []
    for target in (own_id, "env_doesnotexist"):
        for suffix, body in (("top-ups", FUNDING), ("refund", {})):
            response = newcomer.post(f"{ENVELOPES}/{target}/{suffix}", body, key=f"k-{suffix}")
            _refused(response)
            answers.append((suffix, response.status_code, response.json()))
    # The same answer for another buyer's envelope as for a missing id.
    assert answers[:2] == answers[2:]
    assert not RefundOperation.objects.exists()
    assert _provider_calls(stripe_at_sandbox) == calls
    # Reads answer as for anyone else: another buyer's envelope is not found.
    assert newcomer.get(f"{ENVELOPES}/{own_id}").status_code == 404


def test_the_method_and_the_session_requirement_come_first(
    db: None, stripe_at_sandbox: SandboxControl
) -> None:
    newcomer = _sign_up("checker")
    # A method the route does not have: 405, not the e-mail check.
    put = newcomer.client.put(ENVELOPES, FUNDING, format="json", HTTP_X_CSRFTOKEN=newcomer.csrf)
    assert put.status_code == 405
    # A bearer token never moves money: session_required, whatever the address.
    _, raw = api_token_issue(user=newcomer.user)
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    refused = bearer.post(ENVELOPES, FUNDING, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "session_required"
    # Without the CSRF token: csrf_failed (authentication comes first).
    no_csrf = newcomer.post(ENVELOPES, FUNDING, csrf=False)
    assert no_csrf.json()["error"]["code"] == "csrf_failed"
