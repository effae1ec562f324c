"""Issue 37, item 6 (SPEC §2, §15.4): a `funding_accept` records a PaymentIntent as the leg's
money only when it is in the leg's currency. A 300-cent EUR PaymentIntent carrying the leg's
metadata is not $3.00: refused at the proposal, and at the approval (a proposal made before the
check existed is read again then), with `provider_currency_mismatch` saying what the provider
shows. Through the sandbox, with the SDK, as a person would find such a payment in the
Dashboard."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from accounts.models import User
from envelopes.adjustments import adjustment_approve, adjustment_propose
from envelopes.exceptions import AdjustmentProviderMismatch
from envelopes.models import Adjustment, AdjustmentStatus, Envelope, FundingLeg, FundingStatus
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import later, person

pytestmark = pytest.mark.django_db


def _pending_top_up(alice: Api, sandbox: SandboxControl) -> FundingLeg:
    """A $3 top-up of a $5 envelope the provider never saw: a pending leg."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 3_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    funding = FundingLeg.objects.get(sequence=2)
    assert funding.status == FundingStatus.PENDING
    return funding


def _eur_intent(sdk: stripe.StripeClient, funding: FundingLeg) -> Any:
    return sdk.v1.payment_intents.create(
        params={
            "amount": 300,
            "currency": "eur",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            "metadata": {"vouch_funding": funding.public_id},
        }
    )


@pytest.fixture
def proposer(db: None) -> User:
    return person("pia", "envelopes.add_adjustment")


@pytest.fixture
def approver(db: None) -> User:
    return person("aron", "reconciliation.approve_adjustment")


def test_a_payment_in_another_currency_is_refused_at_the_proposal(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User
) -> None:
    funding = _pending_top_up(alice, sandbox)
    intent = _eur_intent(sdk, funding)
    assert intent.status == "succeeded"
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_propose(
            actor=proposer,
            kind="funding_accept",
            reason="Paid, says the Dashboard",
            funding_leg=funding,
            provider_object_id=intent.id,
        )
    assert refused.value.code == "provider_currency_mismatch"
    assert refused.value.details == {"provider_currency": "eur", "currency": "usd"}
    assert refused.value.message == (
        f"PaymentIntent {intent.id} is in EUR; the leg is in USD: 300 cents of another "
        "currency are not the leg's money."
    )
    assert not Adjustment.objects.exists()
    envelope = Envelope.objects.get()
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)


def test_a_payment_in_another_currency_is_refused_at_the_approval(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, proposer: User, approver: User
) -> None:
    funding = _pending_top_up(alice, sandbox)
    intent = _eur_intent(sdk, funding)
    # A proposal made before the check existed: approval reads the provider again.
    adjustment = Adjustment.objects.create(
        envelope=funding.envelope,
        kind="funding_accept",
        amount_micro=3_000_000,
        funding_leg=funding,
        provider_object_id=intent.id,
        provider_object={"id": intent.id},
        reason="Paid, says the Dashboard",
        proposed_by=proposer,
    )
    with later(), pytest.raises(AdjustmentProviderMismatch) as refused:
        adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=3_000_000)
    assert refused.value.code == "provider_currency_mismatch"
    assert Adjustment.objects.get().status == AdjustmentStatus.PROPOSED
    funding.refresh_from_db()
    assert funding.status == FundingStatus.PENDING
    envelope = Envelope.objects.get()
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)
