"""SPEC §15.2 `funding_unrecorded` (issue 24, item 3): a charge carrying Vouch's funding metadata
(`vouch_funding`, which Vouch puts on every PaymentIntent it creates and the provider copies onto
its charge) that no funding leg records by its charge id is money the buyer paid that Vouch counts
nowhere. A pending leg inside the grace period is Vouch's own work in flight (expected); past it,
or once the leg was abandoned or never recorded at all, the run opens a money discrepancy with
its escalation, and clears it once a leg records the charge."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.utils import timezone

from envelopes import services
from envelopes.models import FundingLeg, FundingStatus
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

pytestmark = pytest.mark.django_db

FUNDING: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}


def open_classes() -> list[tuple[str, str]]:
    return sorted(Discrepancy.objects.exclude(status="resolved").values_list("code", "subject_id"))


def lost_answer_creation(alice: Api, sandbox: SandboxControl) -> FundingLeg:
    """An envelope creation the provider made and charged, every answer of which was lost: its
    leg stays pending, without the PaymentIntent's id."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    leg = FundingLeg.objects.get()
    assert (leg.status, leg.charge_id, leg.payment_intent_id) == (FundingStatus.PENDING, "", "")
    return leg


def charge_of(sdk: stripe.StripeClient, leg: FundingLeg) -> dict[str, Any]:
    """The provider's charge for the leg, found as a person would: by Vouch's metadata."""
    query = f"metadata['vouch_funding']:'{leg.public_id}'"
    (intent,) = sdk.v1.payment_intents.search(params={"query": query}).data
    charge = sdk.v1.charges.retrieve(str(intent.latest_charge))
    assert charge.metadata["vouch_funding"] == leg.public_id
    return charge.to_dict()


def age(leg: FundingLeg, seconds: int) -> None:
    FundingLeg.objects.filter(pk=leg.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_a_charge_whose_pending_leg_is_inside_the_grace_period_is_expected(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    leg = lost_answer_creation(alice, stripe_at_sandbox)
    charge_of(sdk, leg)
    run = reconcile(kind="manual")
    assert open_classes() == []
    assert run.expected == 1
    assert run.compared == {"charge": 1}


def test_a_charge_whose_leg_stayed_pending_past_the_grace_is_funding_unrecorded(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    leg = lost_answer_creation(alice, stripe_at_sandbox)
    charge = charge_of(sdk, leg)
    age(leg, 20 * 60)  # past the grace (10 min), not yet stuck (1 h)
    run = reconcile(kind="manual")

    assert open_classes() == [("funding_unrecorded", charge["id"])]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.severity == "money"
    assert discrepancy.subject_type == "charge"
    assert discrepancy.charge_id == charge["id"]
    assert discrepancy.amount_micro == 2_000_000
    assert discrepancy.envelope_public_id == leg.envelope.public_id
    assert discrepancy.provider_side["funding"] == leg.public_id
    assert discrepancy.vouch_side["status"] == "pending"
    assert discrepancy.observation is not None
    assert charge["id"] in str(discrepancy.observation.answer())
    # Its escalation is about the leg (an adjustment on it accepts the PaymentIntent).
    escalation = discrepancy.escalation
    assert escalation is not None
    assert escalation.money
    assert (escalation.subject_type, escalation.subject_id) == ("funding_leg", leg.public_id)
    assert run.report["open_discrepancies"][0]["class"] == "funding_unrecorded"


def test_an_abandoned_leg_whose_charge_succeeded_is_funding_unrecorded(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    leg = lost_answer_creation(alice, stripe_at_sandbox)
    charge = charge_of(sdk, leg)
    # Abandoned, as an adjustment that read nothing at the provider could leave it.
    FundingLeg.objects.filter(pk=leg.pk).update(status=FundingStatus.ABANDONED)
    reconcile(kind="manual")
    assert open_classes() == [("funding_unrecorded", charge["id"])]
    assert Discrepancy.objects.get().vouch_side["status"] == "abandoned"


def test_a_charge_naming_a_funding_leg_vouch_does_not_have_is_funding_unrecorded(
    alice: Api, sdk: stripe.StripeClient
) -> None:
    intent = sdk.v1.payment_intents.create(
        params={
            "amount": 700,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            "metadata": {"vouch_funding": "fnd_nobody", "vouch_envelope": "env_nobody"},
        }
    )
    reconcile(kind="manual")
    assert open_classes() == [("funding_unrecorded", str(intent.latest_charge))]
    discrepancy = Discrepancy.objects.get()
    assert discrepancy.amount_micro == 7_000_000
    assert discrepancy.vouch_side["status"] == ""
    escalation = discrepancy.escalation
    assert escalation is not None
    assert (escalation.subject_type, escalation.subject_id) == ("charge", intent.latest_charge)


def test_funding_unrecorded_clears_once_the_leg_records_the_charge(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    leg = lost_answer_creation(alice, stripe_at_sandbox)
    charge = charge_of(sdk, leg)
    age(leg, 20 * 60)
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get(code="funding_unrecorded")

    services.funding_leg_find(leg=leg)  # looked up by its metadata and recorded
    leg.refresh_from_db()
    assert (leg.status, leg.charge_id) == (FundingStatus.SUCCEEDED, charge["id"])
    clearing = reconcile(kind="manual")
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    assert discrepancy.cleared_by is not None
    assert discrepancy.cleared_by.run == clearing
    assert charge["id"] in str(discrepancy.cleared_by.answer())
    assert open_classes() == []
    assert Escalation.objects.get(verdict_class="funding_unrecorded").status == "resolved"


def test_a_declined_charge_with_vouch_metadata_is_no_discrepancy(alice: Api) -> None:
    response = alice.post(
        "/api/v1/escrow/envelopes", {**FUNDING, "payment_method": "pm_card_chargeDeclined"}
    )
    assert response.status_code == 402, response.content
    run = reconcile(kind="manual")
    assert open_classes() == []
    assert (run.compared, run.expected) == ({}, 0)
    assert Run.objects.count() == 1
