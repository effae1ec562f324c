"""A card that asks for 3-D Secure (issue 36, item 6). Funding is a server-side call with no
browser, so the buyer can never complete Stripe's authentication: Vouch asks Stripe to fail such an
attempt (`error_on_requires_action`) and tells the buyer why, and a PaymentIntent of Vouch's found
waiting for an authentication (`requires_action`) is read as the refusal it is, never a leg left
pending for ever."""

from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.utils import timezone

from envelopes import services
from envelopes.models import Envelope, FundingLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

THREE_D_SECURE = "pm_card_threeDSecure2Required"


def _sdk(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )


def _intents(sandbox: SandboxControl) -> list[dict[str, Any]]:
    return [pi.to_dict() for pi in _sdk(sandbox).v1.payment_intents.list(params={"limit": 100})]


def test_a_card_asking_for_3d_secure_is_refused_and_nothing_is_charged(
    alice: Api, sandbox: SandboxControl
) -> None:
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": THREE_D_SECURE}
    )
    assert response.status_code == 402, response.content
    error = response.json()["error"]
    assert error["code"] == "authentication_required"
    assert "3-D Secure" in error["message"]
    assert "nothing was charged" in error["message"].lower()
    assert not Envelope.objects.exists()
    assert not FundingLeg.objects.exists()
    [intent] = _intents(sandbox)
    assert intent["status"] != "succeeded"
    assert intent["amount_received"] == 0
    assert ledger_breaches() == []


def test_a_top_up_asking_for_3d_secure_leaves_the_envelope_as_it_was(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 2_000_000, "payment_method": THREE_D_SECURE},
    )
    assert response.status_code == 402, response.content
    assert response.json()["error"]["code"] == "authentication_required"
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)
    assert FundingLeg.objects.count() == 1


def test_a_leg_whose_payment_intent_waits_for_authentication_is_refused_not_pending(
    alice: Api, sandbox: SandboxControl
) -> None:
    """A creation whose answer was lost; the PaymentIntent the provider holds for it waits for a
    3-D Secure authentication nobody can give (a PaymentIntent made without
    `error_on_requires_action`, as Stripe leaves it). The lookup past the key life reads it as the
    refusal it is: the leg is gone, not pending for ever, and nothing is charged."""
    funding = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", funding, key="create-3ds-1")
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    leg = FundingLeg.objects.get()
    intent = _sdk(sandbox).v1.payment_intents.create(
        params={
            "amount": 200,
            "currency": "usd",
            "payment_method": THREE_D_SECURE,
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            "metadata": {"vouch_funding": leg.public_id, "vouch_envelope": leg.envelope.public_id},
        }
    )
    assert intent.status == "requires_action"
    # A day on for the leg (the provider has forgotten its key), not for the buyer's request.
    FundingLeg.objects.filter(pk=leg.pk).update(created_at=timezone.now() - timedelta(hours=25))
    services.stranded_resume(older_than_s=60)
    assert not FundingLeg.objects.exists()
    assert not Envelope.objects.exists()
    assert [i["status"] for i in _intents(sandbox)] == ["requires_action"]  # nothing charged
    assert ledger_breaches() == []
