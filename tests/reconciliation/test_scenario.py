"""SPEC §15 acceptance, the mixed scenario: more than a thousand clean provider objects made by
seeded random money operations through Vouch's own API (envelopes, top-ups, refunds of random
amounts spanning several legs, several buyers; a few refund legs left in flight inside the grace
window), plus one drift of each of the sixteen classes. One run finds every drift and opens
nothing else (precision and recall 100%). Running again opens nothing new; repairing at the
provider the drifts that can be repaired there and running again clears exactly those, each citing
an observation of that run that shows its subject."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.db import connections
from django.db.models import F
from django.utils import timezone

from accounts.models import User
from disputes.models import FilingStatus, Packet
from envelopes.models import Envelope, FundingLeg, LegOutcome, RefundLeg, RefundOperation
from envelopes.services import refund_leg_on_provider_event
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import Ops, World, contest_ready
from verification.models import VerificationRun

# The buyers act at the same time, each on a connection of its own: their work is committed.
pytestmark = pytest.mark.django_db(transaction=True)

SEED = 20261130
CENT = 10_000  # micro-dollars
ENOUGH = 1_000  # provider objects (charges and refunds) the clean ledger holds at least
ENVELOPES = 120
IN_FLIGHT = 6  # refund operations whose answer never arrives (apply_then_drop: made at Stripe)
LOST = 2  # refund operations that time out before Stripe made anything


@dataclass
class Drift:
    code: str
    subject_id: str
    # The provider object the discrepancy is about (what its observations must show).
    provider_id: str
    # How to put it right at the provider, when it can be put right there.
    repair: Callable[[], Any] | None = None


def open_set() -> set[tuple[str, str]]:
    return set(Discrepancy.objects.exclude(status="resolved").values_list("code", "subject_id"))


def precision_recall(found: set[Any], expected: set[Any]) -> str:
    hits = found & expected
    precision = len(hits) / len(found) if found else 1.0
    recall = len(hits) / len(expected) if expected else 1.0
    return (
        f"precision {precision:.1%}, recall {recall:.1%}; "
        f"opened but not a drift: {sorted(found - expected)}; "
        f"drifts not found: {sorted(expected - found)}"
    )


def refund(buyer: Api, envelope_id: str, amount_micro: int | None) -> list[RefundLeg]:
    body = {} if amount_micro is None else {"amount_micro": amount_micro}
    response = buyer.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", body)
    assert response.status_code in (200, 202), response.content
    operation = RefundOperation.objects.get(public_id=response.json()["data"]["refund_id"])
    return list(operation.legs.order_by("sequence"))


def funded(buyer: Api, amount_micro: int = 10_000_000) -> tuple[str, FundingLeg]:
    data = buyer.create(amount_micro)
    return data["envelope_id"], FundingLeg.objects.get(
        envelope__public_id=data["envelope_id"], sequence=1
    )


# --- the clean ledger --------------------------------------------------------------------------


@dataclass
class Plan:
    """One envelope's random life: its charges (the creation, then top-ups, in cents) and its
    refunds (each a share of what is unspent then; None: all of it)."""

    buyer: int
    charges: list[int]
    refunds: list[float | None]
    # How the last refund's answer is lost: "" (it is not), "dropped" (Stripe made the first
    # leg's refund, then the connection dropped and stayed down), "lost" (nothing reached Stripe).
    lost: str = ""


def plans(rng: random.Random, buyers: int) -> list[Plan]:
    made = []
    for _ in range(ENVELOPES):
        charges = [rng.randrange(100, 6_000)] + [
            rng.randrange(100, 4_000) for _ in range(rng.randint(2, 5))
        ]
        refunds: list[float | None] = [rng.random() for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.6:
            refunds[-1] = None
        made.append(Plan(rng.randrange(buyers), charges, refunds))
    chosen = rng.sample(made, IN_FLIGHT + LOST)
    for plan in chosen[:IN_FLIGHT]:
        plan.lost = "dropped"
    for plan in chosen[IN_FLIGHT:]:
        plan.lost = "lost"
    return made


def refund_share(buyer: Api, envelope_id: str, share: float | None) -> list[RefundLeg]:
    if share is None:
        return refund(buyer, envelope_id, None)
    unspent = Envelope.objects.get(public_id=envelope_id).unspent_micro // CENT
    # Most shares are larger than the newest charge's part: the refund spans several legs.
    return refund(buyer, envelope_id, max(1, int(unspent * share)) * CENT)


def live(buyer: Api, plans: list[Plan]) -> list[tuple[Plan, str]]:
    """One buyer's envelopes, one operation after another (as one person would), in a thread of
    its own; the refunds whose answer is lost are left for later (faults strike every caller)."""
    left = []
    try:
        for plan in plans:
            envelope_id = buyer.create(plan.charges[0] * CENT)["envelope_id"]
            for cents in plan.charges[1:]:
                buyer.top_up(envelope_id, cents * CENT)
            for share in plan.refunds[:-1] if plan.lost else plan.refunds:
                refund_share(buyer, envelope_id, share)
            if plan.lost:
                left.append((plan, envelope_id))
    finally:
        connections.close_all()
    return left


def clean_ledger(buyers: list[Api], sandbox: SandboxControl, rng: random.Random) -> list[RefundLeg]:
    """Random envelopes, top-ups and refunds through the API, the buyers at the same time. The last
    refund of a few envelopes never gets its answer (their legs stay unknown): those whose first
    leg Stripe made are in flight. Returns those legs."""
    made = plans(rng, len(buyers))
    with ThreadPoolExecutor(len(buyers)) as pool:
        lives = [
            pool.submit(live, buyer, [p for p in made if p.buyer == n])
            for n, buyer in enumerate(buyers)
        ]
        left = [item for done in lives for item in done.result()]
    in_flight = []
    for plan, envelope_id in left:
        if plan.lost == "dropped":
            sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
        sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=20)
        legs = refund_share(buyers[plan.buyer], envelope_id, plan.refunds[-1])
        sandbox.clear_faults()
        assert {leg.outcome for leg in legs} == {LegOutcome.UNKNOWN}
        if plan.lost == "dropped":
            in_flight.append(legs[0])
    return in_flight


# --- one drift of each class (as tests/reconciliation/test_classes.py makes each) ---------------


def make_drifts(
    buyer: Api, sandbox: SandboxControl, sdk: stripe.StripeClient, people: Ops
) -> list[Drift]:
    drifts: list[Drift] = []

    # Disputes first: the World settles every pending verification run, and only these are.
    world = World(buyer, sandbox)
    world.fund()
    dispute = world.dispute()
    sandbox.tamper(dispute.provider_dispute_id, status="under_review")
    drifts.append(
        Drift(
            "dispute_status_drift",
            dispute.provider_dispute_id,
            dispute.provider_dispute_id,
            lambda: sandbox.tamper(dispute.provider_dispute_id, status="needs_response"),
        )
    )
    packet = contest_ready(World(buyer, sandbox), people)
    Packet.objects.filter(pk=packet.pk).update(filing_status=FilingStatus.FILED)
    filed = packet.dispute.provider_dispute_id
    drifts.append(Drift("filing_unconfirmed", filed, filed))

    # The money a dispute moved (SPEC §18): Stripe reinstated a chargeback's funds an hour ago
    # and no event said so; the ledger still holds them.
    charged = World(buyer, sandbox)
    charged.fund()
    held_id = charged.dispute().provider_dispute_id
    withdrawal = sdk.v1.disputes.retrieve(held_id).to_dict()["balance_transactions"]
    earlier = {**withdrawal[0], "created": withdrawal[0]["created"] - 3_600}
    reinstatement = {
        **earlier,
        "id": f"txn_back_{held_id[-12:]}",
        "amount": -earlier["amount"],
        "net": -earlier["amount"],
        "fee": 0,
        "fee_details": [],
        "reporting_category": "dispute_reversal",
    }
    sandbox.tamper(held_id, balance_transactions=[earlier, reinstatement])
    drifts.append(
        Drift(
            "dispute_funds_mismatch",
            held_id,
            held_id,
            lambda: sandbox.tamper(held_id, balance_transactions=withdrawal),
        )
    )

    _, funding = funded(buyer)
    opened = sandbox.open_dispute(funding.charge_id)
    # Made an hour ago: past the grace in which its webhook could still be on its way.
    sandbox.tamper(opened["id"], created=opened["created"] - 3_600)
    drifts.append(Drift("dispute_unrecorded", opened["id"], opened["id"]))

    _, funding = funded(buyer)
    sandbox.forget(funding.charge_id)
    drifts.append(Drift("charge_missing", funding.public_id, funding.charge_id))

    _, mismatched = funded(buyer)
    sandbox.tamper(mismatched.charge_id, amount=999)
    drifts.append(
        Drift(
            "charge_mismatch",
            mismatched.public_id,
            mismatched.charge_id,
            lambda: sandbox.tamper(mismatched.charge_id, amount=1_000),
        )
    )

    envelope_id, over = funded(buyer)
    refund(buyer, envelope_id, 2_000_000)
    sandbox.tamper(over.charge_id, amount_refunded=500)
    drifts.append(
        Drift(
            "charge_refunded_mismatch",
            over.public_id,
            over.charge_id,
            lambda: sandbox.tamper(over.charge_id, amount_refunded=200),
        )
    )

    envelope_id, _ = funded(buyer)
    (missing,) = refund(buyer, envelope_id, 2_000_000)
    sandbox.forget(missing.provider_refund_id)
    drifts.append(Drift("refund_missing", missing.public_id, missing.provider_refund_id))

    envelope_id, _ = funded(buyer)
    (renamed,) = refund(buyer, envelope_id, 2_000_000)
    metadata = sdk.v1.refunds.retrieve(renamed.provider_refund_id).to_dict()["metadata"]
    sandbox.tamper(renamed.provider_refund_id, metadata={"vouch_leg": "rfl_someone_else"})
    drifts.append(
        Drift(
            "refund_mismatch",
            renamed.public_id,
            renamed.provider_refund_id,
            lambda: sandbox.tamper(renamed.provider_refund_id, metadata=metadata),
        )
    )

    envelope_id, _ = funded(buyer)
    (drifted,) = refund(buyer, envelope_id, 2_000_000)
    sandbox.set_refund_status(drifted.provider_refund_id, "failed")
    # Its refund.failed webhook released the leg, as it does; then the refund shows succeeded.
    refund_leg_on_provider_event(event={"data": {"object": {"id": drifted.provider_refund_id}}})
    assert RefundLeg.objects.get(pk=drifted.pk).released
    sandbox.tamper(drifted.provider_refund_id, status="succeeded")
    drifts.append(
        Drift(
            "refund_status_drift",
            drifted.public_id,
            drifted.provider_refund_id,
            lambda: sandbox.tamper(drifted.provider_refund_id, status="failed"),
        )
    )

    _, funding = funded(buyer)
    foreign = sdk.v1.refunds.create(params={"charge": funding.charge_id, "amount": 300})
    drifts.append(
        Drift(
            "refund_foreign",
            foreign.id,
            foreign.id,
            lambda: sandbox.set_refund_status(foreign.id, "failed"),
        )
    )

    envelope_id, funding = funded(buyer)
    (twice,) = refund(buyer, envelope_id, 2_000_000)
    duplicate = sdk.v1.refunds.create(
        params={
            "charge": funding.charge_id,
            "amount": 200,
            "metadata": {"vouch_leg": twice.public_id},
        }
    )
    drifts.append(
        Drift(
            "refund_duplicate",
            twice.public_id,
            duplicate.id,
            lambda: sandbox.set_refund_status(duplicate.id, "failed"),
        )
    )

    envelope_id, funding = funded(buyer)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=20)
    (stuck,) = refund(buyer, envelope_id, 2_000_000)
    sandbox.clear_faults()
    RefundLeg.objects.filter(pk=stuck.pk).update(reserved_at=timezone.now() - timedelta(hours=2))
    drifts.append(Drift("leg_stuck", stuck.public_id, funding.charge_id))

    envelope_id, _ = funded(buyer)
    sandbox.add_fault("/v1/payment_intents", "timeout", method="POST", delay_ms=20)
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    assert response.status_code >= 202, response.content
    pending = FundingLeg.objects.get(envelope__public_id=envelope_id, status="pending")
    FundingLeg.objects.filter(pk=pending.pk).update(created_at=timezone.now() - timedelta(hours=2))
    drifts.append(Drift("funding_stuck", pending.public_id, pending.payment_intent_id))

    # A top-up the provider charged whose every answer was lost, its leg then abandoned (as an
    # adjustment that read nothing at the provider could): a charge no funding leg records.
    envelope_id, _ = funded(buyer)
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    assert response.status_code == 202, response.content
    lost = FundingLeg.objects.get(envelope__public_id=envelope_id, status="pending")
    FundingLeg.objects.filter(pk=lost.pk).update(status="abandoned")
    query = f"metadata['vouch_funding']:'{lost.public_id}'"
    (intent,) = sdk.v1.payment_intents.search(params={"query": query}).data
    unrecorded = str(intent.latest_charge)
    drifts.append(Drift("funding_unrecorded", unrecorded, unrecorded))

    newest = VerificationRun.objects.order_by("-id").first()
    funded(buyer)
    overdue = VerificationRun.objects.filter(id__gt=newest.pk if newest else 0).get()
    VerificationRun.objects.filter(pk=overdue.pk).update(
        deadline_at=timezone.now() - timedelta(minutes=1)
    )
    drifts.append(Drift("run_overdue", overdue.public_id, overdue.public_id))

    envelope_id, _ = funded(buyer)
    Envelope.objects.filter(public_id=envelope_id).update(
        unspent_micro=F("unspent_micro") - 10_000, reserved_micro=F("reserved_micro") + 10_000
    )
    drifts.append(Drift("ledger_breach", envelope_id, envelope_id))

    assert sorted(d.code for d in drifts) == sorted(
        code for code, _ in Discrepancy._meta.get_field("code").choices
    ), "one drift of each class"
    return drifts


@pytest.fixture
def buyers(alice: Api) -> list[Api]:
    return [alice] + [
        Api(User.objects.create_user(f"buyer{n}", f"buyer{n}@example.com", f"pw-buyer-{n}"))
        for n in range(3)
    ]


def test_every_drift_is_found_and_nothing_else_among_a_thousand_clean_objects(
    buyers: list[Api],
    stripe_at_sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    ops: Ops,
) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    drifts = make_drifts(buyers[0], stripe_at_sandbox, sdk, ops)
    before = stripe_at_sandbox.state()["counts"]
    in_flight = clean_ledger(buyers, stripe_at_sandbox, rng)
    built = time.monotonic()

    counts = stripe_at_sandbox.state()["counts"]
    made = {kind: counts[kind] - before[kind] for kind in ("charges", "refunds")}
    assert sum(made.values()) >= ENOUGH, made
    spanning = RefundOperation.objects.filter(legs__sequence=2).distinct().count()
    assert spanning >= 50, "refunds of random amounts span several legs"
    assert set(Envelope.objects.values_list("owner", flat=True)) == {b.user.pk for b in buyers}
    assert in_flight, "some refund legs are in flight inside the grace window"

    cpu = time.process_time()
    first = reconcile(kind="manual")
    ran = time.monotonic()
    cpu = time.process_time() - cpu
    expected = {(d.code, d.subject_id) for d in drifts}
    found = open_set()
    assert found == expected, precision_recall(found, expected)
    assert first.status == "completed"
    assert first.opened == {code: 1 for code, _ in expected}
    assert len(first.opened) == 17
    assert sum(first.compared.values()) >= ENOUGH, first.compared
    # What Vouch has in flight and the provider made already: counted, not opened.
    assert first.expected == len(in_flight) > 0

    # Acceptance 3: running again opens nothing new; every drift is seen again.
    second = reconcile(kind="manual")
    assert (second.opened, second.cleared) == ({}, {})
    assert second.seen == first.opened
    assert open_set() == expected
    assert set(Discrepancy.objects.values_list("seen_count", flat=True)) == {2}
    assert Discrepancy.objects.count() == 17

    # Repaired at the provider: the next run clears exactly those, citing what it read.
    repaired = [d for d in drifts if d.repair is not None]
    assert {d.code for d in repaired} == {
        "charge_mismatch",
        "charge_refunded_mismatch",
        "refund_mismatch",
        "refund_status_drift",
        "refund_foreign",
        "refund_duplicate",
        "dispute_status_drift",
        "dispute_funds_mismatch",
    }
    for drift in repaired:
        drift.repair()
    third = reconcile(kind="manual")
    assert third.opened == {}
    cleared = {(d.code, d.subject_id) for d in repaired}
    assert open_set() == expected - cleared, precision_recall(expected - open_set(), cleared)
    assert third.cleared == {d.code: 1 for d in repaired}
    for drift in repaired:
        discrepancy = Discrepancy.objects.get(code=drift.code, subject_id=drift.subject_id)
        assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
        observation = discrepancy.cleared_by
        assert observation is not None, drift.code
        assert observation.run_id == third.pk, drift.code
        shown = str(observation.answer())
        assert drift.subject_id in shown, (drift.code, shown)
        assert drift.provider_id in shown, (drift.code, shown)
    still = Discrepancy.objects.exclude(status="resolved")
    assert set(still.values_list("seen_count", flat=True)) == {3}
    assert Run.objects.filter(status="completed").count() == 3
    print(
        f"\nscenario: {made['charges']} clean charges + {made['refunds']} clean refunds "
        f"({sum(first.compared.values())} compared, {first.pages} pages, {first.expected} in "
        f"flight) built in {built - started:.1f}s, first run {ran - built:.1f}s ({cpu:.1f}s CPU), "
        f"total {time.monotonic() - started:.1f}s"
    )
