"""The comparison of the ledger with the provider (SPEC §15.1, §15.2), value by value: one run over
a book holding one case of every comparison — agreeing objects, each drift, what Vouch has in
flight, what is not Vouch's — must record exactly these discrepancies, each with exactly both
sides, the fields that differ, the money it concerns, its charge, envelope and escalation, and
count exactly what it compared, expected and corrected. Then the smaller rules one at a time.

These are the tests that make `bench/mutation/reconciliation.engine.*.toml` bite: a comparison
removed, a side's field renamed, a count off by one or a branch turned round changes a value
asserted here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.db.models import F

from envelopes.models import (
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.selectors import ledger_breaches
from envelopes.services import refund_leg_on_provider_event
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

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
        params={
            "amount": 500,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
        }
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

    # charge_mismatch: status, amount and currency differ (evidence: no escalation); and its
    # refunded total too, which that finding does not explain (only refund-level ones do).
    mismatched = funded(alice)
    sandbox.tamper(
        mismatched.charge_id, amount=999, currency="eur", status="pending", amount_refunded=50
    )
    expected[("charge_mismatch", mismatched.public_id)] = Row(
        "funding_leg",
        charge_side(mismatched),
        charge_side(mismatched, amount=999, currency="eur", status="pending", amount_refunded=50),
        ["status", "amount", "currency"],
        mismatched.charge_id,
        mismatched.envelope.public_id,
        10_000_000,
        "evidence",
    )
    expected[("charge_refunded_mismatch", mismatched.public_id)] = Row(
        "funding_leg",
        charge_side(mismatched),
        charge_side(mismatched, amount=999, currency="eur", status="pending", amount_refunded=50),
        ["amount_refunded"],
        mismatched.charge_id,
        mismatched.envelope.public_id,
        500_000,
        "money",
        ("funding_leg", mismatched.public_id),
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
    sandbox.tamper(
        resized.provider_refund_id, amount=150, metadata={"vouch_leg": "rfl_someone_else"}
    )
    moved = refunded(alice, funded(alice))
    sandbox.tamper(moved.provider_refund_id, charge=clean.charge_id)
    for leg, changed in (
        (renamed, {"vouch_leg": "rfl_someone_else"}),
        (resized, {"amount": 150, "vouch_leg": "rfl_someone_else"}),
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
            "allowed_payment_method_types": ["card"],
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

    # A leg past the grace whose answer was lost (the provider made its refund): not in flight
    # any more, not stuck yet (the stuck phase names it after an hour); its charge may show it.
    late_funding = funded(alice)
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    late = refund_of(alice, late_funding)
    sandbox.clear_faults()
    RefundLeg.objects.filter(pk=late.pk).update(
        reserved_at=late.reserved_at - timedelta(minutes=20)
    )

    # Refunds carrying Vouch's metadata for a leg Vouch does not have: just made, in flight (its
    # charge may show it); made an hour ago, refund_foreign.
    named_new = funded(alice)
    sdk.v1.refunds.create(
        params={
            "charge": named_new.charge_id,
            "amount": 100,
            "metadata": {"vouch_leg": "rfl_not_here_yet"},
        }
    )
    named_old = funded(alice)
    old_named = sdk.v1.refunds.create(
        params={
            "charge": named_old.charge_id,
            "amount": 100,
            "metadata": {"vouch_leg": "rfl_not_here"},
        }
    )
    sandbox.tamper(old_named.id, created=old_named.created - 3_600)
    expected[("refund_foreign", old_named.id)] = Row(
        "refund",
        {"refund": "", "charge": named_old.charge_id, "amount": None, "vouch_leg": ""},
        {
            "refund": old_named.id,
            "charge": named_old.charge_id,
            "amount": 100,
            "vouch_leg": "rfl_not_here",
            "status": "succeeded",
        },
        ["refund", "amount"],
        named_old.charge_id,
        named_old.envelope.public_id,
        1_000_000,
        "money",
        ("funding_leg", named_old.public_id),
    )

    # dispute_unrecorded (made an hour ago), and one inside the grace (its webhook may come).
    old_dispute = sandbox.open_dispute(dashboard.charge_id, amount=400)
    sandbox.tamper(old_dispute["id"], created=old_dispute["created"] - 3_600)
    older_dispute = sandbox.open_dispute(over.charge_id, amount=100)  # listed after it
    sandbox.tamper(older_dispute["id"], created=older_dispute["created"] - 7_200)
    sandbox.open_dispute(clean.charge_id)
    expected[("dispute_unrecorded", older_dispute["id"])] = Row(
        "dispute",
        {"dispute": "", "charge": over.charge_id, "status": ""},
        {
            "dispute": older_dispute["id"],
            "charge": over.charge_id,
            "status": "needs_response",
            "amount": 100,
            "submissions": 0,
        },
        ["dispute", "status"],
        over.charge_id,
        "",
        0,
        "evidence",
    )
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
    # Two balances off by different amounts: the breach's money is the larger.
    Envelope.objects.filter(pk=breached.envelope.pk).update(
        unspent_micro=F("unspent_micro") - 30_000,
        reserved_micro=F("reserved_micro") + 10_000,
        total_refunded_micro=F("total_refunded_micro") + 20_000,
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

    # Not Vouch's: a dispute on a charge Vouch did not make (the newest: listed first).
    sandbox.open_dispute(str(other.latest_charge))

    run = reconcile(kind="manual")

    summaries = dict(Discrepancy.objects.values_list("subject_id", "summary"))
    assert summaries[resized.public_id] == (
        f"Refund {resized.provider_refund_id} differs from leg {resized.public_id} in amount, "
        "vouch_leg"
    )
    assert Discrepancy.objects.get(code="charge_mismatch").summary == (
        f"Charge {mismatched.charge_id} differs from funding leg {mismatched.public_id} in "
        "status, amount, currency"
    )
    assert Discrepancy.objects.get(
        code="charge_refunded_mismatch", subject_id=over.public_id
    ).summary == (
        f"Charge {over.charge_id} shows 500 cents refunded; Vouch's legs on it hold 200 cents."
    )
    assert summaries[foreign.id] == (
        f"Refund {foreign.id} of 300 cents on charge {dashboard.charge_id} was made outside Vouch."
    )
    assert summaries[old_named.id] == (
        f"Refund {old_named.id} of 100 cents on charge {named_old.charge_id} was made outside "
        "Vouch (it names leg rfl_not_here, which Vouch does not have)."
    )
    assert summaries[str(stranger.latest_charge)] == (
        f"Charge {stranger.latest_charge} of 700 cents carries funding leg fnd_nobody, which "
        "Vouch does not have."
    )
    assert summaries[str(abandoned_intent.latest_charge)] == (
        f"Charge {abandoned_intent.latest_charge} of 200 cents carries funding leg "
        f"{abandoned.public_id}, which is abandoned and records no such charge."
    )
    assert Discrepancy.objects.get(code="ledger_breach").summary == (
        f"Envelope {breached.envelope.public_id}'s stored balances disagree with its journal or "
        "legs: reserved_micro, total_refunded_micro, unspent_micro"
    )
    assert Discrepancy.objects.get(code="ledger_breach").amount_micro == 30_000
    # Amounts in whole cents, as the provider shows them: never a float.
    for discrepancy in Discrepancy.objects.all():
        for side in (discrepancy.vouch_side, discrepancy.provider_side):
            assert not [v for v in side.values() if isinstance(v, float)], discrepancy.code
    found = {(d.code, d.subject_id): recorded(d) for d in Discrepancy.objects.all()}
    assert sorted(found) == sorted(expected)
    for key, row in expected.items():
        assert found[key] == row, key
    to_release.refresh_from_db()
    assert to_release.released
    release = JournalEntry.objects.get(kind="release", refund_leg=to_release)
    assert release.note == f"reconciliation {run.public_id}: the provider shows the refund failed"
    # What the ledger phase read is stored with the breach: the stored and journal balances.
    breach = Discrepancy.objects.get(code="ledger_breach")
    assert breach.observation is not None
    assert (breach.observation.kind, breach.observation.request) == ("ledger", {"what": "ledger"})
    assert breach.observation.answer() == {
        "stored": {b.balance: b.stored for b in breaches},
        "journal": {b.balance: b.from_journal for b in breaches},
    }
    # Vouch charges: 14 funded listed, the forgotten one read alone, 2 unrecorded and 1 pending
    # in its grace; refunds on Vouch charges: 13 listed (the Dashboard ones and the one in flight
    # among them) and the forgotten one read alone. Not the charge and refund that are not Vouch's.
    assert run.compared == {"charge": 21, "refund": 17, "dispute": 3}
    # One page of each list, and the two objects read alone, each answered at the first attempt.
    assert (run.pages, run.provider_calls) == (3, 5)
    # The pending funding leg, the refund leg in flight, the named refund just made, the new
    # dispute.
    assert run.expected == 4
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


# --- clearing: each discrepancy looked at again alone, citing the read that shows it gone -------


def read_of(discrepancy: Discrepancy) -> tuple[str, dict[str, Any], Any]:
    """The observation a discrepancy was cleared by: its kind, request and answer."""
    cited = discrepancy.cleared_by
    assert cited is not None, discrepancy.code
    return cited.kind, cited.request, cited.answer()


def test_each_discrepancy_clears_citing_the_read_that_shows_it_gone(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    from tests.drivers.disputes import World

    sandbox = stripe_at_sandbox
    mismatched = funded(alice)
    sandbox.tamper(mismatched.charge_id, amount=999)
    renamed = refunded(alice, funded(alice))
    metadata = {"vouch_leg": renamed.public_id}
    sandbox.tamper(renamed.provider_refund_id, metadata={"vouch_leg": "rfl_someone_else"})
    twice_funding = funded(alice)
    twice = refunded(alice, twice_funding)
    duplicate = sdk.v1.refunds.create(
        params={
            "charge": twice_funding.charge_id,
            "amount": 100,
            "metadata": {"vouch_leg": twice.public_id},
        }
    )
    drifted = refunded(alice, funded(alice))
    sandbox.set_refund_status(drifted.provider_refund_id, "failed")
    refund_leg_on_provider_event(event={"data": {"object": {"id": drifted.provider_refund_id}}})
    sandbox.tamper(drifted.provider_refund_id, status="succeeded")
    world = World(alice, sandbox)
    world.fund()
    dispute = world.dispute()
    sandbox.tamper(dispute.provider_dispute_id, status="under_review")
    stuck_funding = funded(alice)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=20)
    stuck = refund_of(alice, stuck_funding)
    sandbox.clear_faults()
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=stuck.reserved_at - timedelta(hours=2))

    first = reconcile(kind="manual")
    assert first.opened == {
        "charge_mismatch": 1,
        "refund_mismatch": 1,
        "refund_duplicate": 1,
        "refund_status_drift": 1,
        "dispute_status_drift": 1,
        "leg_stuck": 1,
    }

    sandbox.tamper(mismatched.charge_id, amount=1_000)
    sandbox.tamper(renamed.provider_refund_id, metadata=metadata)
    sandbox.set_refund_status(duplicate.id, "failed")
    sandbox.tamper(drifted.provider_refund_id, status="failed")
    sandbox.tamper(dispute.provider_dispute_id, status="needs_response")
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=stuck.reserved_at)  # in flight again
    second = reconcile(kind="manual")
    assert second.cleared == first.opened
    assert second.opened == {}
    cleared = {d.code: d for d in Discrepancy.objects.filter(resolution="cleared")}
    assert all(d.cleared_by.run_id == second.pk for d in cleared.values())  # type: ignore[union-attr]

    def alone(kind: str, object_id: str) -> tuple[str, dict[str, Any]]:
        return kind, {"path": f"/v1/{kind}s/{object_id}", "http_status": 200}

    kind, request, answer = read_of(cleared["charge_mismatch"])
    assert ((kind, request), answer["amount"]) == (alone("charge", mismatched.charge_id), 1000)
    kind, request, answer = read_of(cleared["refund_mismatch"])
    assert ((kind, request), answer["metadata"]) == (
        alone("refund", renamed.provider_refund_id),
        metadata,
    )
    # A duplicate is looked at through the second refund, not the one the leg records.
    kind, request, answer = read_of(cleared["refund_duplicate"])
    assert ((kind, request), answer["status"]) == (alone("refund", duplicate.id), "failed")
    kind, request, answer = read_of(cleared["refund_status_drift"])
    assert ((kind, request), answer["status"]) == (
        alone("refund", drifted.provider_refund_id),
        "failed",
    )
    kind, request, answer = read_of(cleared["dispute_status_drift"])
    assert ((kind, request), answer["status"]) == (
        alone("dispute", dispute.provider_dispute_id),
        "needs_response",
    )
    # What the stuck phase looks at is the whole ledger: not named means gone. What Vouch itself
    # shows is stored as canonical JSON (keys sorted), hashed as stored.
    assert read_of(cleared["leg_stuck"]) == (
        "ledger",
        {"what": "leg_stuck"},
        {"subject": stuck.public_id, "found": False},
    )
    cited = cleared["leg_stuck"].cleared_by
    assert cited is not None
    assert cited.body_bytes() == (b'{"found": false, "subject": "%s"}' % stuck.public_id.encode())
    assert cited.sha256_matches()


def refund_of(buyer: Api, funding: FundingLeg) -> RefundLeg:
    """A refund asked for, whatever its answer (accepted, or in flight)."""
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{funding.envelope.public_id}/refund",
        {"amount_micro": 2_000_000},
    )
    assert response.status_code in (200, 202), response.content
    return RefundLeg.objects.get(operation__public_id=response.json()["data"]["refund_id"])


def test_what_is_still_missing_outside_the_window_is_seen_again_not_cleared(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    from django.utils import timezone

    gone = funded(alice)
    stripe_at_sandbox.forget(gone.charge_id)
    lost = refunded(alice, funded(alice))
    stripe_at_sandbox.forget(lost.provider_refund_id)
    first = reconcile(kind="manual")
    assert first.opened == {"charge_missing": 1, "refund_missing": 1}

    # A window of last month: nothing in it; what was missing is looked at again alone.
    now = timezone.now()
    second = reconcile(
        kind="manual", since=now - timedelta(days=40), until=now - timedelta(days=30)
    )
    assert (second.seen, second.cleared, second.opened) == (
        {"charge_missing": 1, "refund_missing": 1},
        {},
        {},
    )
    for code, object_id in (
        ("charge_missing", gone.charge_id),
        ("refund_missing", lost.provider_refund_id),
    ):
        discrepancy = Discrepancy.objects.get(code=code)
        assert discrepancy.last_run == second
        cited = discrepancy.observation
        assert cited is not None
        assert cited.run == second
        assert cited.answer() == {"error": "resource_missing", "id": object_id}


def test_a_missing_refund_whose_leg_was_released_clears_citing_the_ledger(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    lost = refunded(alice, funded(alice))
    stripe_at_sandbox.forget(lost.provider_refund_id)
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get(code="refund_missing")
    # Given back (as a reverse approved by two people would): released, the money unspent.
    RefundLeg.objects.filter(pk=lost.pk).update(released=True)
    Envelope.objects.filter(pk=lost.operation.envelope_id).update(
        unspent_micro=F("unspent_micro") + lost.amount_micro,
        total_refunded_micro=F("total_refunded_micro") - lost.amount_micro,
    )
    second = reconcile(kind="manual")
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    assert read_of(discrepancy) == (
        "ledger",
        {"what": "refund_missing"},
        {"leg": lost.public_id, "released": True},
    )
    assert second.cleared.get("refund_missing") == 1


def test_a_released_legs_refund_carrying_its_name_clears_through_that_refund(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    stripe_at_sandbox.add_fault(
        "/v1/refunds", "refuse", method="POST", error_code="charge_disputed", times=1
    )
    response = alice.post(
        f"/api/v1/escrow/envelopes/{funding.envelope.public_id}/refund",
        {"amount_micro": 2_000_000},
    )
    stripe_at_sandbox.clear_faults()
    assert response.json()["data"]["status"] == "failed", response.content
    refused = RefundLeg.objects.get()
    assert (refused.outcome, refused.provider_refund_id) == (LegOutcome.REFUSED, "")
    made = sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 200,
            "metadata": {"vouch_leg": refused.public_id},
        }
    )
    first = reconcile(kind="manual")
    drift = Discrepancy.objects.get(code="refund_status_drift")
    refused.refresh_from_db()
    assert drift.subject_id == refused.public_id
    assert drift.vouch_side == {
        "refund": "",
        "charge": funding.charge_id,
        "amount": 200,
        "vouch_leg": refused.public_id,
        "status": "released" if refused.released else "refused",
        "leg_outcome": "refused",
    }
    assert drift.provider_side == {
        "refund": made.id,
        "charge": funding.charge_id,
        "amount": 200,
        "vouch_leg": refused.public_id,
        "status": "succeeded",
    }
    assert drift.differing == ["refund", "status"]
    assert first.opened == {"refund_status_drift": 1}

    stripe_at_sandbox.set_refund_status(made.id, "failed")
    reconcile(kind="manual")
    drift.refresh_from_db()
    kind, request, answer = read_of(drift)
    assert (kind, request["path"], answer["status"]) == (
        "refund",
        f"/v1/refunds/{made.id}",
        "failed",
    )


def test_a_discrepancy_whose_subject_is_gone_clears_with_nothing_to_cite(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    from django.utils import timezone

    now = timezone.now()
    earlier = Run.objects.create(
        kind="manual",
        lane="objects",
        status="completed",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
    )
    leg = refunded(alice, funded(alice))
    subjects = [
        ("charge_mismatch", "funding_leg", "fnd_gone"),
        ("refund_mismatch", "refund_leg", "rfl_gone"),
        ("refund_mismatch", "refund_leg_of_another_kind", "x"),
        ("refund_duplicate", "refund_leg", leg.public_id),  # naming no provider refund
    ]
    for code, subject_type, subject_id in subjects:
        Discrepancy.objects.create(
            code=code,
            severity="evidence",
            subject_type=subject_type,
            subject_id=subject_id,
            summary="made by hand",
            first_seen_at=now,
            last_seen_at=now,
            due_at=now,
            first_run=earlier,
            last_run=earlier,
        )
    run = reconcile(kind="manual")
    assert run.cleared == {"charge_mismatch": 1, "refund_mismatch": 2, "refund_duplicate": 1}
    assert run.provider_calls == run.pages  # nothing was read for them
    for discrepancy in Discrepancy.objects.all():
        assert (discrepancy.resolution, discrepancy.cleared_by) == ("cleared", None)


def test_a_dry_run_clears_nothing(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    mismatched = funded(alice)
    stripe_at_sandbox.tamper(mismatched.charge_id, amount=999)
    reconcile(kind="manual")
    stripe_at_sandbox.tamper(mismatched.charge_id, amount=1_000)
    dry = reconcile(kind="manual", dry_run=True)
    assert (dry.cleared, dry.opened, dry.seen) == ({}, {}, {})
    assert Discrepancy.objects.get().status == "open"
    assert "clear" not in {o.kind for o in dry.observations.all()}
    assert not dry.observations.filter(kind="charge").exists()  # nothing looked at again


# --- what is stuck: over the whole ledger, each with exactly its side ----------------------------


def test_each_stuck_thing_is_recorded_with_exactly_its_side(
    alice: Api,
    stripe_at_sandbox: SandboxControl,
    ops: Any,
) -> None:
    from django.utils import timezone

    from disputes.models import FilingStatus, Packet
    from tests.drivers.disputes import World, contest_ready
    from verification.models import VerificationRun

    sandbox = stripe_at_sandbox
    hours_ago = timezone.now() - timedelta(hours=2)
    packet = contest_ready(World(alice, sandbox), ops)
    Packet.objects.filter(pk=packet.pk).update(
        filing_status=FilingStatus.SUBMITTING, filing_started_at=hours_ago
    )
    leg_funding = funded(alice)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=20)
    stuck = refund_of(alice, leg_funding)
    sandbox.clear_faults()
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=hours_ago)
    stuck.refresh_from_db()
    sandbox.add_fault("/v1/payment_intents", "timeout", method="POST", delay_ms=20)
    response = alice.post(
        f"/api/v1/escrow/envelopes/{leg_funding.envelope.public_id}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    assert response.status_code == 202, response.content
    pending = FundingLeg.objects.get(status="pending")
    FundingLeg.objects.filter(pk=pending.pk).update(created_at=hours_ago)
    pending.refresh_from_db()
    VerificationRun.objects.filter(verdict="PENDING").delete()  # none but the one made overdue
    overdue_funding = funded(alice)
    overdue = VerificationRun.objects.get(verdict="PENDING")
    VerificationRun.objects.filter(pk=overdue.pk).update(deadline_at=hours_ago)
    overdue.refresh_from_db()
    assert overdue_funding.charge_id

    run = reconcile(kind="manual")
    assert run.opened == {
        "filing_unconfirmed": 1,
        "leg_stuck": 1,
        "funding_stuck": 1,
        "run_overdue": 1,
    }
    sides = {
        d.code: (d.subject_type, d.subject_id, d.vouch_side, d.charge_id, d.envelope_public_id)
        for d in Discrepancy.objects.all()
    }
    leg_side = {
        "leg": stuck.public_id,
        "outcome": "unknown",
        "amount": 200,
        "charge": leg_funding.charge_id,
        "reserved_at": hours_ago.isoformat(),
        "error_code": stuck.error_code,
    }
    assert sides == {
        "leg_stuck": (
            "refund_leg",
            stuck.public_id,
            leg_side,
            leg_funding.charge_id,
            leg_funding.envelope.public_id,
        ),
        "funding_stuck": (
            "funding_leg",
            pending.public_id,
            {
                "funding": pending.public_id,
                "status": "pending",
                "amount": 100,
                "payment_intent": pending.payment_intent_id,
                "created_at": hours_ago.isoformat(),
            },
            "",
            leg_funding.envelope.public_id,
        ),
        "run_overdue": (
            "verification_run",
            overdue.public_id,
            {
                "run": overdue.public_id,
                "contract": overdue.contract_id,
                "verdict": "PENDING",
                "deadline_at": hours_ago.isoformat(),
                "attempts": overdue.attempts_made,
            },
            "",
            "",
        ),
        "filing_unconfirmed": (
            "dispute",
            packet.dispute.provider_dispute_id,
            {
                "dispute": packet.dispute.provider_dispute_id,
                "packet": packet.public_id,
                "filing_status": "submitting",
                "filing_started_at": hours_ago.isoformat(),
            },
            packet.dispute.charge_id,
            "",
        ),
    }
    amounts = dict(Discrepancy.objects.values_list("code", "amount_micro"))
    assert amounts == {
        "leg_stuck": 2_000_000,
        "funding_stuck": 1_000_000,
        "run_overdue": 0,
        "filing_unconfirmed": 0,
    }
    cited = Discrepancy.objects.get(code="leg_stuck").observation
    assert cited is not None
    assert (cited.kind, cited.request, cited.answer()) == (
        "ledger",
        {"what": "refund leg"},
        leg_side,
    )
    whats = {
        d.code: d.observation.request["what"]  # type: ignore[union-attr]
        for d in Discrepancy.objects.all()
    }
    assert whats == {
        "leg_stuck": "refund leg",
        "funding_stuck": "funding leg",
        "run_overdue": "verification run",
        "filing_unconfirmed": "filing",
    }
    severities = dict(Discrepancy.objects.values_list("code", "severity"))
    assert severities == {
        "leg_stuck": "hygiene",
        "funding_stuck": "hygiene",
        "run_overdue": "evidence",
        "filing_unconfirmed": "evidence",
    }


def test_what_is_in_flight_is_not_stuck_until_its_time(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    from django.utils import timezone

    leg_funding = funded(alice)
    stripe_at_sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=20)
    stuck = refund_of(alice, leg_funding)
    stripe_at_sandbox.clear_faults()
    just_in_time = timezone.now() - timedelta(seconds=settings.RECONCILIATION_STUCK_AFTER_S - 60)
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=just_in_time)
    assert reconcile(kind="manual").opened == {}
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=just_in_time - timedelta(seconds=61))
    assert reconcile(kind="manual").opened == {"leg_stuck": 1}


def test_a_succeeded_funding_leg_without_a_charge_id_is_not_read_alone_and_its_charge_is_unrecorded(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    FundingLeg.objects.filter(pk=funding.pk).update(charge_id="")
    before = stripe_at_sandbox.state()["requests"]
    run = reconcile(kind="manual")
    after = stripe_at_sandbox.state()["requests"]
    reads = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    assert reads == {"GET /v1/refunds": 1, "GET /v1/charges": 1, "GET /v1/disputes": 1}
    assert (run.compared, run.opened) == ({"charge": 1}, {"funding_unrecorded": 1})


def test_an_object_read_alone_that_the_provider_cannot_answer_stops_the_run(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    from reconciliation.engine import ReconciliationIncomplete

    gone = funded(alice)
    stripe_at_sandbox.forget(gone.charge_id)
    stripe_at_sandbox.add_fault(f"/v1/charges/{gone.charge_id}", "server_error", method="GET")
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual")
    run = Run.objects.get()
    assert run.status == "failed"
    assert run.checkpoint == {"phase": "disputes", "done": True}
    assert f"the charge page {{'id': '{gone.charge_id}'}} could not be read" in run.error
    assert Discrepancy.objects.count() == 0  # not taken for missing


def test_a_dry_run_would_not_release_a_refund_already_given_back(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    leg = refunded(alice, funded(alice))
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed")
    refund_leg_on_provider_event(event={"data": {"object": {"id": leg.provider_refund_id}}})
    dry = reconcile(kind="manual", dry_run=True)
    assert (dry.corrected, dry.opened) == (0, {})
    real = reconcile(kind="manual")
    assert (real.corrected, real.opened) == (0, {})


@pytest.mark.parametrize("shown", [None, True, "300"], ids=["none", "a boolean", "a string"])
def test_a_refunded_total_that_is_not_a_number_of_cents_is_a_mismatch(
    alice: Api, stripe_at_sandbox: SandboxControl, shown: Any
) -> None:
    funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount_refunded=shown)
    reconcile(kind="manual")
    mismatch = Discrepancy.objects.get()
    assert (mismatch.code, mismatch.amount_micro) == ("charge_refunded_mismatch", 10_000)
    assert mismatch.summary == (
        f"Charge {funding.charge_id} shows -1 cents refunded; Vouch's legs on it hold 0 cents."
    )
    assert mismatch.provider_side["amount_refunded"] == shown


# --- disputes ---------------------------------------------------------------------------------


def test_each_dispute_is_compared_with_exactly_its_row(
    alice: Api,
    stripe_at_sandbox: SandboxControl,
    ops: Any,
) -> None:
    from disputes.models import Dispute, FilingStatus, Packet
    from tests.drivers.disputes import World, contest_ready

    sandbox = stripe_at_sandbox
    drifting = World(alice, sandbox)
    drifting.fund()
    drifted = drifting.dispute()
    sandbox.tamper(drifted.provider_dispute_id, status="under_review")
    blank = World(alice, sandbox)
    blank.fund()
    unknown_status = blank.dispute()
    Dispute.objects.filter(pk=unknown_status.pk).update(provider_status="")
    unconfirmed = contest_ready(World(alice, sandbox), ops)
    Packet.objects.filter(pk=unconfirmed.pk).update(filing_status=FilingStatus.FILED)
    confirmed = contest_ready(World(alice, sandbox), ops)
    Packet.objects.filter(pk=confirmed.pk).update(filing_status=FilingStatus.FILED)
    evidence = dict(sdk_dispute(sandbox, confirmed.dispute.provider_dispute_id))
    sandbox.tamper(
        confirmed.dispute.provider_dispute_id,
        evidence_details={**evidence, "submission_count": 1},
    )

    run = reconcile(kind="manual")
    assert run.compared["dispute"] == 4
    assert {d.subject_type for d in Discrepancy.objects.all()} == {"dispute"}
    rows = {
        (d.code, d.subject_id): (d.vouch_side, d.provider_side, d.differing, d.charge_id, d.summary)
        for d in Discrepancy.objects.all()
    }

    def sides(dispute: Any, status: str, filed: str, submissions: int) -> tuple[dict, dict]:
        vouch = {
            "dispute": dispute.provider_dispute_id,
            "charge": dispute.charge_id,
            "status": dispute.provider_status,
            "amount": dispute.amount_micro // CENT,
            "submissions": filed,
        }
        provider = {**vouch, "status": status, "submissions": submissions}
        return vouch, provider

    unknown_status.refresh_from_db()
    key = unconfirmed.dispute.provider_dispute_id
    assert rows == {
        ("dispute_status_drift", drifted.provider_dispute_id): (
            *sides(drifted, "under_review", "", 0),
            ["status"],
            drifted.charge_id,
            f"Dispute {drifted.provider_dispute_id} is under_review at the provider, "
            "needs_response here.",
        ),
        ("dispute_status_drift", unknown_status.provider_dispute_id): (
            *sides(unknown_status, "needs_response", "", 0),
            ["status"],
            unknown_status.charge_id,
            f"Dispute {unknown_status.provider_dispute_id} is needs_response at the provider, "
            "(no status) here.",
        ),
        ("filing_unconfirmed", key): (
            *sides(unconfirmed.dispute, "needs_response", "filed", 0),
            ["submissions"],
            unconfirmed.dispute.charge_id,
            f"Vouch shows a filed packet for dispute {key}; the provider shows no evidence "
            "submission.",
        ),
    }


def sdk_dispute(sandbox: SandboxControl, dispute_id: str) -> dict[str, Any]:
    """The dispute's evidence details as the provider shows them now."""
    import stripe as stripe_sdk

    client = stripe_sdk.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    return dict(client.v1.disputes.retrieve(dispute_id).to_dict()["evidence_details"])


def test_a_disputes_finding_does_not_explain_its_charges_refunded_total(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    """Only refund-level findings explain a charge's refunded total: a dispute on the charge,
    found before the charge is read alone, explains nothing."""
    sandbox = stripe_at_sandbox
    funding = funded(alice)
    charge = sdk_charge(sandbox, funding.charge_id)
    # The charge made a month ago (the listing of the last 7 days does not show it: it is read
    # alone), its leg recorded in the window; its refunded total differs; a dispute on it.
    sandbox.tamper(funding.charge_id, created=charge["created"] - 30 * 86_400, amount_refunded=300)
    opened = sandbox.open_dispute(funding.charge_id)
    sandbox.tamper(opened["id"], created=opened["created"] - 3_600)
    run = reconcile(kind="manual")
    assert run.opened == {"dispute_unrecorded": 1, "charge_refunded_mismatch": 1}


def sdk_charge(sandbox: SandboxControl, charge_id: str) -> dict[str, Any]:
    client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )
    return dict(client.v1.charges.retrieve(charge_id).to_dict())


def test_a_charge_whose_leg_is_not_succeeded_is_not_compared_and_the_next_ones_are(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    older, newer = funded(alice), funded(alice)  # one page, newest first
    FundingLeg.objects.filter(pk=newer.pk).update(status=FundingStatus.PENDING)
    stripe_at_sandbox.tamper(newer.charge_id, amount=1)
    stripe_at_sandbox.tamper(older.charge_id, amount=999)
    run = reconcile(kind="manual")
    assert run.compared == {"charge": 2}
    # The older charge is compared on the page that listed it, not read again alone after it.
    assert run.provider_calls == run.pages == 3
    mismatch = Discrepancy.objects.get(code="charge_mismatch")
    assert mismatch.observation is not None
    assert mismatch.observation.kind == "charges"
    # (The ledger, counting that leg's money as funded, disagrees with it: a breach besides.)
    assert sorted(Discrepancy.objects.values_list("code", "subject_id")) == [
        ("charge_mismatch", older.public_id),
        ("ledger_breach", newer.envelope.public_id),
    ]


def test_a_missing_refund_and_charge_that_come_back_clear_citing_their_reads_alone(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    """Created before the run's window, they are read alone; refused, they are missing; answered
    again, the next run clears each citing the read that found it."""
    sandbox = stripe_at_sandbox
    funding = funded(alice)
    leg = refunded(alice, funded(alice))
    long_ago = int((funding.created_at - timedelta(days=30)).timestamp())
    sandbox.tamper(funding.charge_id, created=long_ago)
    sandbox.tamper(leg.provider_refund_id, created=long_ago)
    for path in (f"/v1/charges/{funding.charge_id}", f"/v1/refunds/{leg.provider_refund_id}"):
        sandbox.add_fault(path, "refuse", method="GET", error_code="resource_missing")
    first = reconcile(kind="manual")
    assert first.opened == {"charge_missing": 1, "refund_missing": 1}

    sandbox.clear_faults()
    second = reconcile(kind="manual")
    assert (second.cleared, second.opened) == ({"charge_missing": 1, "refund_missing": 1}, {})
    for code, kind, object_id in (
        ("charge_missing", "charge", funding.charge_id),
        ("refund_missing", "refund", leg.provider_refund_id),
    ):
        discrepancy = Discrepancy.objects.get(code=code)
        assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
        cited, request, answer = read_of(discrepancy)
        assert (cited, request) == (kind, {"path": f"/v1/{kind}s/{object_id}", "http_status": 200})
        assert answer["id"] == object_id
        assert discrepancy.cleared_by is not None
        assert discrepancy.cleared_by.run_id == second.pk


def test_a_missing_refund_about_the_refund_itself_is_read_alone_and_cleared_citing_that_read(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    """A row of a class that reads again whose subject is not a leg (the provider's refund itself,
    as a row written by hand or by an older Vouch would name it) is still read alone, and cleared
    citing that read: never cleared on nothing."""
    sandbox = stripe_at_sandbox
    leg = refunded(alice, funded(alice))
    long_ago = int((leg.reserved_at - timedelta(days=30)).timestamp())
    sandbox.tamper(leg.provider_refund_id, created=long_ago)
    path = f"/v1/refunds/{leg.provider_refund_id}"
    sandbox.add_fault(path, "refuse", method="GET", error_code="resource_missing")
    reconcile(kind="manual")
    Discrepancy.objects.filter(code="refund_missing").update(
        subject_type="refund", subject_id=leg.provider_refund_id
    )

    sandbox.clear_faults()
    second = reconcile(kind="manual")

    discrepancy = Discrepancy.objects.get(code="refund_missing")
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    cited, request, answer = read_of(discrepancy)
    assert (cited, request) == ("refund", {"path": path, "http_status": 200})
    assert answer["id"] == leg.provider_refund_id
    assert second.cleared == {"refund_missing": 1}


def test_a_run_records_every_object_of_vouch_its_pages_showed(
    alice: Api,
    stripe_at_sandbox: SandboxControl,
    ops: Any,
) -> None:
    """What a run listed is kept (Seen: what the ledger side is checked against, and what a
    resumed run does not list again): Vouch's charges, refunds and disputes, not a stranger's."""
    from reconciliation.models import Seen
    from tests.drivers.disputes import World

    world = World(alice, stripe_at_sandbox)
    world.fund()
    dispute = world.dispute()
    leg = refunded(alice, funded(alice))
    stranger = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": stripe_at_sandbox.url}, max_network_retries=0
    ).v1.payment_intents.create(
        params={
            "amount": 500,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
        }
    )
    stripe_at_sandbox.open_dispute(str(stranger.latest_charge))
    run = reconcile(kind="manual")
    charges = set(FundingLeg.objects.values_list("charge_id", flat=True))
    assert set(Seen.objects.filter(run=run).values_list("object_id", flat=True)) == {
        *charges,
        leg.provider_refund_id,
        dispute.provider_dispute_id,
    }


def test_a_filing_in_flight_is_not_stuck_until_its_time(
    alice: Api,
    stripe_at_sandbox: SandboxControl,
    settings: Any,
    ops: Any,
) -> None:
    from django.utils import timezone

    from disputes.models import FilingStatus, Packet
    from tests.drivers.disputes import World, contest_ready

    packet = contest_ready(World(alice, stripe_at_sandbox), ops)
    just_in_time = timezone.now() - timedelta(
        seconds=settings.RECONCILIATION_FILING_STUCK_AFTER_S - 60
    )
    Packet.objects.filter(pk=packet.pk).update(
        filing_status=FilingStatus.SUBMITTING, filing_started_at=just_in_time
    )
    assert reconcile(kind="manual").opened == {}
    Packet.objects.filter(pk=packet.pk).update(
        filing_started_at=just_in_time - timedelta(seconds=61)
    )
    assert reconcile(kind="manual").opened == {"filing_unconfirmed": 1}
