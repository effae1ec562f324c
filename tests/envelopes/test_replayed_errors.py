"""A 500 after the provider's endpoint began is kept under the idempotency key and replayed to
every retry, as Stripe does (issue 36, item 7; https://docs.stripe.com/api/idempotent_requests).
Retrying can no longer heal it: Vouch reads the provider instead, at once, and what the provider
holds decides. Nothing is guessed: a leg the provider shows no trace of stays unknown, its money
reserved."""

from typing import Any

import pytest
import stripe

from envelopes.models import Envelope, FundingLeg, FundingStatus, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _refunds(sdk: stripe.StripeClient, charge: str) -> list[dict[str, Any]]:
    return [r.to_dict() for r in sdk.v1.refunds.list(params={"charge": charge, "limit": 100})]


def test_a_refund_applied_then_answered_500_is_found_and_counted_once(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    sandbox.add_fault("/v1/refunds", "apply_then_error", method="POST", times=1)
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 200, response.content
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.ACCEPTED
    [refund] = _refunds(sdk, charge)
    assert (leg.provider_refund_id, refund["amount"]) == (refund["id"], 200)
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (2_000_000, 3_000_000)
    assert ledger_breaches() == []


def test_a_500_that_applied_nothing_leaves_the_leg_unknown_and_refunds_nothing(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    data = alice.create(5_000_000)
    envelope_id, charge = data["envelope_id"], data["funding_legs"][0]["charge"]
    sandbox.add_fault("/v1/refunds", "error_after_begin", method="POST", times=1)
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 202, response.content
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.UNKNOWN
    assert _refunds(sdk, charge) == []
    # The resumption resends under the same key: the provider replays the 500, nothing is made.
    from envelopes import services

    services.stranded_resume(older_than_s=-1)
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.UNKNOWN
    assert _refunds(sdk, charge) == []
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.unspent_micro) == (2_000_000, 3_000_000)
    assert ledger_breaches() == []


def test_a_payment_applied_then_answered_500_is_found_and_funded_once(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    sandbox.add_fault("/v1/payment_intents", "apply_then_error", method="POST", times=1)
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 201, response.content
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.SUCCEEDED
    intents = sdk.v1.payment_intents.list(params={"limit": 10}).data
    assert [pi.id for pi in intents] == [leg.payment_intent_id]
    assert Envelope.objects.get().unspent_micro == 2_000_000
    assert ledger_breaches() == []
