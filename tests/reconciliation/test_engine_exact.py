"""The comparison of the ledger with the provider (SPEC §15.1, §15.2), value by value: one run over
a book holding one case of every comparison — agreeing objects, each drift, what Vouch has in
flight, what is not Vouch's — must record exactly these discrepancies, each with exactly both
sides, the fields that differ, the money it concerns, its charge, envelope and escalation, and
count exactly what it compared, expected and corrected. Then the smaller rules one at a time.

These are the tests that make `bench/mutation/reconciliation.engine.toml` bite: a comparison
removed, a side's field renamed, a count off by one or a branch turned round changes a value
asserted here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import stripe
from django.db.models import F

from envelopes.models import Envelope, FundingLeg, FundingStatus, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from envelopes.services import refund_leg_on_provider_event
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.envelopes.conftest import Api

pytestmark = pytest.mark.django_db

CENT = 10_000  # micro-dollars


def funded(buyer: Api, amount_micro: int = 10_000_000) -> FundingLeg:
    data = buyer.create(amount_micro)
    return FundingLeg.objects.select_related("envelope").get(
        envelope__public_id=data["envelope_id"], sequence=1
    )


def refunded(buyer: Api, funding: FundingLeg, amount_micro: int = 2_000_000) -> RefundLeg:
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{funding.envelope.public_id}/refund",
        {"amount_micro": amount_micro},
    )
    assert response.status_code == 200, response.content
    return RefundLeg.objects.get(operation__public_id=response.json()["data"]["refund_id"])


def leg_side(leg: RefundLeg, status: str = "live") -> dict[str, Any]:
    """Vouch's side of a refund leg, as every refund-leg discrepancy shows it."""
    return {
        "refund": leg.provider_refund_id,
        "charge": leg.funding_leg.charge_id,
        "amount": leg.amount_micro // CENT,
        "vouch_leg": leg.public_id,
        "status": status,
        "leg_outcome": leg.outcome,
    }


def charge_side(funding: FundingLeg, **changed: Any) -> dict[str, Any]:
    side = {
        "charge": funding.charge_id,
        "status": "succeeded",
        "amount": funding.amount_micro // CENT,
        "currency": "usd",
        "amount_refunded": 0,
    }
    return {**side, **changed}


@dataclass
class Row:
    """A discrepancy as the run must record it."""

    subject_type: str
    vouch_side: dict[str, Any]
    provider_side: dict[str, Any]
    differing: list[str]
    charge_id: str
    envelope_public_id: str
    amount_micro: int
    severity: str
    escalation: tuple[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def recorded(discrepancy: Discrepancy) -> Row:
    escalation = discrepancy.escalation
    return Row(
        subject_type=discrepancy.subject_type,
        vouch_side=discrepancy.vouch_side,
        provider_side=discrepancy.provider_side,
        differing=discrepancy.differing,
        charge_id=discrepancy.charge_id,
        envelope_public_id=discrepancy.envelope_public_id,
        amount_micro=discrepancy.amount_micro,
        severity=discrepancy.severity,
        escalation=(escalation.subject_type, escalation.subject_id) if escalation else None,
    )


def lost_answer_creation(buyer: Api, sandbox: SandboxControl) -> FundingLeg:
    """An envelope creation the provider charged, every answer lost: a pending leg."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = buyer.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    sandbox.clear_faults()
    assert response.status_code == 202, response.content
    return FundingLeg.objects.select_related("envelope").get(
        envelope__public_id=response.json()["data"]["envelope_id"]
    )


def intent_of(sdk: stripe.StripeClient, funding: FundingLeg) -> Any:
    query = f"metadata['vouch_funding']:'{funding.public_id}'"
    (intent,) = sdk.v1.payment_intents.search(params={"query": query}).data
    return intent


def test_one_run_records_every_drift_with_exactly_both_sides(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    sandbox = stripe_at_sandbox
    expected: dict[tuple[str, str], Row] = {}

    # Agreeing: a charge with a refund leg on it, and a Dashboard refund that failed (it gave
    # nothing back: nothing to record).
    clean = funded(alice)
    refunded(alice, clean)
    failed_foreign = sdk.v1.refunds.create(params={"charge": clean.charge_id, "amount": 100})
    sandbox.set_refund_status(failed_foreign.id, "failed")

    # Not Vouch's: a charge without Vouch's metadata, and a refund on it.
    other = sdk.v1.payment_intents.create(
        params={"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "confirm": True}
    )
    sdk.v1.refunds.create(params={"charge": str(other.latest_charge), "amount": 100})

    # charge_missing: the provider has no such charge (read alone: the listing did not show it).
    gone = funded(alice)
    sandbox.forget(gone.charge_id)
    expected[("charge_missing", gone.public_id)] = Row(
        "funding_leg",
        {"charge": gone.charge_id, "status": "succeeded", "amount": 1000},
        {"charge": "", "status": "", "amount": None},
        ["charge", "status", "amount"],
        gone.charge_id,
        gone.envelope.public_id,
        10_000_000,
        "money",
        ("funding_leg", gone.public_id),
    )

    # charge_mismatch: the amount differs (evidence: no escalation).
    mismatched = funded(alice)
    sandbox.tamper(mismatched.charge_id, amount=999, currency="eur", status="pending")
    expected[("charge_mismatch", mismatched.public_id)] = Row(
        "funding_leg",
        charge_side(mismatched),
        charge_side(mismatched, amount=999, currency="eur", status="pending"),
        ["status", "amount", "currency"],
        mismatched.charge_id,
        mismatched.envelope.public_id,
        10_000_000,
        "evidence",
    )

    # charge_refunded_mismatch: more refunded at the provider than the legs hold.
    over = funded(alice)
    refunded(alice, over)
    sandbox.tamper(over.charge_id, amount_refunded=500)
    expected[("charge_refunded_mismatch", over.public_id)] = Row(
        "funding_leg",
        charge_side(over, amount_refunded=200),
        charge_side(over, amount_refunded=500),
        ["amount_refunded"],
        over.charge_id,
        over.envelope.public_id,
        3_000_000,
        "money",
        ("funding_leg", over.public_id),
    )
    # ... and less: a charge showing nothing refunded while a leg holds $2.00.
    under = funded(alice)
    refunded(alice, under)
    sandbox.tamper(under.charge_id, amount_refunded=0)
    expected[("charge_refunded_mismatch", under.public_id)] = Row(
        "funding_leg",
        charge_side(under, amount_refunded=200),
        charge_side(under, amount_refunded=0),
        ["amount_refunded"],
        under.charge_id,
        under.envelope.public_id,
        2_000_000,
        "money",
        ("funding_leg", under.public_id),
    )

    # refund_missing: the leg's refund is not at the provider.
    lost_refund = refunded(alice, funded(alice))
    sandbox.forget(lost_refund.provider_refund_id)
    expected[("refund_missing", lost_refund.public_id)] = Row(
        "refund_leg",
        leg_side(lost_refund),
        {"refund": "", "charge": "", "amount": None, "vouch_leg": "", "status": ""},
        ["refund", "amount", "status"],
        lost_refund.funding_leg.charge_id,
        lost_refund.operation.envelope.public_id,
        2_000_000,
        "money",
        ("refund_leg", lost_refund.public_id),
    )

    # refund_mismatch, once for each compared field: the leg named, the amount, the charge.
    renamed = refunded(alice, funded(alice))
    sandbox.tamper(renamed.provider_refund_id, metadata={"vouch_leg": "rfl_someone_else"})
    resized = refunded(alice, funded(alice))
    sandbox.tamper(resized.provider_refund_id, amount=150)
    moved = refunded(alice, funded(alice))
    sandbox.tamper(moved.provider_refund_id, charge=clean.charge_id)
    for leg, changed in (
        (renamed, {"vouch_leg": "rfl_someone_else"}),
        (resized, {"amount": 150}),
        (moved, {"charge": clean.charge_id}),
    ):
        provider = {**leg_side(leg), "status": "succeeded", "leg_outcome": "", **changed}
        expected[("refund_mismatch", leg.public_id)] = Row(
            "refund_leg",
            leg_side(leg),
            provider,
            list(changed),
            leg.funding_leg.charge_id,
            leg.operation.envelope.public_id,
            2_000_000,
            "money",
            ("refund_leg", leg.public_id),
        )

    # The one automatic correction: a refund the provider shows failed, its leg never released.
    to_release = refunded(alice, funded(alice))
    sandbox.set_refund_status(to_release.provider_refund_id, "failed")

    # refund_status_drift: a released leg whose refund the provider shows succeeded again.
    drifted = refunded(alice, funded(alice))
    sandbox.set_refund_status(drifted.provider_refund_id, "failed")
    refund_leg_on_provider_event(event={"data": {"object": {"id": drifted.provider_refund_id}}})
    drifted.refresh_from_db()
    assert drifted.released
    sandbox.tamper(drifted.provider_refund_id, status="succeeded")
    expected[("refund_status_drift", drifted.public_id)] = Row(
        "refund_leg",
        leg_side(drifted, status="released"),
        {**leg_side(drifted), "status": "succeeded", "leg_outcome": ""},
        ["status"],
        drifted.funding_leg.charge_id,
        drifted.operation.envelope.public_id,
        2_000_000,
        "money",
        ("refund_leg", drifted.public_id),
    )

    # refund_foreign: a Dashboard refund on a Vouch charge (its charge's total is explained by it).
    dashboard = funded(alice)
    foreign = sdk.v1.refunds.create(params={"charge": dashboard.charge_id, "amount": 300})
    expected[("refund_foreign", foreign.id)] = Row(
        "refund",
        {"refund": "", "charge": dashboard.charge_id, "amount": None, "vouch_leg": ""},
        {
            "refund": foreign.id,
            "charge": dashboard.charge_id,
            "amount": 300,
            "vouch_leg": "",
            "status": "succeeded",
        },
        ["refund", "amount"],
        dashboard.charge_id,
        dashboard.envelope.public_id,
        3_000_000,
        "money",
        ("funding_leg", dashboard.public_id),
    )

    # refund_duplicate: a second refund carrying a recorded leg's name.
    twice_funding = funded(alice)
    twice = refunded(alice, twice_funding)
    duplicate = sdk.v1.refunds.create(
        params={
            "charge": twice_funding.charge_id,
            "amount": 150,
            "metadata": {"vouch_leg": twice.public_id},
        }
    )
    expected[("refund_duplicate", twice.public_id)] = Row(
        "refund_leg",
        leg_side(twice),
        {
            "refund": duplicate.id,
            "charge": twice_funding.charge_id,
            "amount": 150,
            "vouch_leg": twice.public_id,
            "status": "succeeded",
        },
        ["refund"],
        twice_funding.charge_id,
        twice_funding.envelope.public_id,
        1_500_000,
        "money",
        ("refund_leg", twice.public_id),
    )

    # funding_unrecorded: a charge naming a funding leg Vouch does not have, and one whose leg
    # was abandoned; a pending leg's charge inside the grace is expected.
    stranger = sdk.v1.payment_intents.create(
        params={
            "amount": 700,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "metadata": {"vouch_funding": "fnd_nobody"},
        }
    )
    expected[("funding_unrecorded", str(stranger.latest_charge))] = Row(
        "charge",
        {"charge": "", "funding": "", "status": "", "amount": None},
        {
            "charge": stranger.latest_charge,
            "funding": "fnd_nobody",
            "status": "succeeded",
            "amount": 700,
            "payment_intent": stranger.id,
        },
        ["charge", "funding", "status"],
        str(stranger.latest_charge),
        "",
        7_000_000,
        "money",
        ("charge", str(stranger.latest_charge)),
    )
    abandoned = lost_answer_creation(alice, sandbox)
    FundingLeg.objects.filter(pk=abandoned.pk).update(status=FundingStatus.ABANDONED)
    abandoned_intent = intent_of(sdk, abandoned)
    expected[("funding_unrecorded", str(abandoned_intent.latest_charge))] = Row(
        "charge",
        {"charge": "", "funding": abandoned.public_id, "status": "abandoned", "amount": 200},
        {
            "charge": abandoned_intent.latest_charge,
            "funding": abandoned.public_id,
            "status": "succeeded",
            "amount": 200,
            "payment_intent": abandoned_intent.id,
        },
        ["charge", "status"],
        str(abandoned_intent.latest_charge),
        abandoned.envelope.public_id,
        2_000_000,
        "money",
        ("funding_leg", abandoned.public_id),
    )
    lost_answer_creation(alice, sandbox)  # pending, inside the grace: expected

    # A refund leg in flight (its answer lost after the provider made it): expected; its charge
    # shows the refund the leg may hold.
    in_flight_funding = funded(alice)
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    response = alice.post(
        f"/api/v1/escrow/envelopes/{in_flight_funding.envelope.public_id}/refund",
        {"amount_micro": 2_000_000},
    )
    sandbox.clear_faults()
    assert response.status_code in (200, 202), response.content
    assert RefundLeg.objects.get(funding_leg=in_flight_funding).outcome == LegOutcome.UNKNOWN

    # dispute_unrecorded (made an hour ago), and one inside the grace (its webhook may come).
    old_dispute = sandbox.open_dispute(dashboard.charge_id, amount=400)
    sandbox.tamper(old_dispute["id"], created=old_dispute["created"] - 3_600)
    sandbox.open_dispute(clean.charge_id)
    expected[("dispute_unrecorded", old_dispute["id"])] = Row(
        "dispute",
        {"dispute": "", "charge": dashboard.charge_id, "status": ""},
        {
            "dispute": old_dispute["id"],
            "charge": dashboard.charge_id,
            "status": "needs_response",
            "amount": 400,
            "submissions": 0,
        },
        ["dispute", "status"],
        dashboard.charge_id,
        "",
        0,
        "evidence",
    )

    # ledger_breach: stored balances that disagree with the journal and legs.
    breached = funded(alice)
    Envelope.objects.filter(pk=breached.envelope.pk).update(
        unspent_micro=F("unspent_micro") - 10_000, reserved_micro=F("reserved_micro") + 10_000
    )
    breaches = ledger_breaches()
    expected[("ledger_breach", breached.envelope.public_id)] = Row(
        "envelope",
        {b.balance: b.stored for b in breaches},
        {b.balance: b.from_legs for b in breaches},
        sorted(b.balance for b in breaches),
        "",
        breached.envelope.public_id,
        max(abs(b.stored - b.from_legs) for b in breaches),
        "money",
        ("envelope", breached.envelope.public_id),
    )

    run = reconcile(kind="manual")

    found = {(d.code, d.subject_id): recorded(d) for d in Discrepancy.objects.all()}
    assert sorted(found) == sorted(expected)
    for key, row in expected.items():
        assert found[key] == row, key
    to_release.refresh_from_db()
    assert to_release.released
    # Vouch charges: 14 funded listed, the forgotten one read alone, 2 unrecorded and 1 pending
    # in its grace; refunds on Vouch charges: 13 listed (the Dashboard ones and the one in flight
    # among them) and the forgotten one read alone. Not the charge and refund that are not Vouch's.
    assert run.compared == {"charge": 18, "refund": 14, "dispute": 2}
    assert run.expected == 3  # the pending funding leg, the refund in flight, the new dispute
    assert run.corrected == 1
    assert run.opened == {code: sum(1 for c, _ in expected if c == code) for code, _ in expected}
    assert run.seen == {}
    assert run.cleared == {}
    assert run.status == "completed"


def test_a_second_run_sees_each_drift_again_and_records_nothing_new(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    mismatched = funded(alice)
    stripe_at_sandbox.tamper(mismatched.charge_id, amount=999)
    first = reconcile(kind="manual")
    second = reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get()
    assert (first.opened, first.seen) == ({"charge_mismatch": 1}, {})
    assert (second.opened, second.seen) == ({}, {"charge_mismatch": 1})
    assert (discrepancy.seen_count, discrepancy.first_run, discrepancy.last_run) == (
        2,
        first,
        second,
    )
    assert Run.objects.count() == 2
