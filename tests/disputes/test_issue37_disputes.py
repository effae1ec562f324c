"""Issue 37, items 1-4 and the outcome fees (SPEC §18, §9, §17): a dispute is recorded as Stripe
shows it (and the filing readback checks its charge), filing re-reads the facts a packet rests on,
network fee acknowledgements on every posture Stripe requires them on, a refund recorded by
four-eyes adjustment counts as a refund, and the outcome figures take fees from Stripe's balance
transactions."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.utils import timezone

from core.models import AuditEvent
from disputes import services
from disputes.admin.review import citation_rows
from disputes.exceptions import FeeNotAcknowledged, PacketFactsChanged
from disputes.models import Dispute, Packet
from disputes.outcomes import dispute_outcomes
from envelopes.models import RefundLeg
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import (
    CLERK,
    Ops,
    World,
    approve,
    contest_ready,
    current,
    evidence,
    file,
    staff_user,
)
from tests.drivers.disputes37 import record_dashboard_refund
from tests.helpers import settle_runs
from verification.contracts import Verdict, get_contract
from verification.evaluation import decide
from verification.expressions import Context
from verification.models import ProviderEvent, VerificationRun
from verification.services import provider_event_process, provider_event_store


def at_provider(sandbox: SandboxControl, dispute_id: str) -> Any:
    """The dispute as the provider holds it, read through the SDK (not through Vouch)."""
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def event(dispute_id: str) -> None:
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.updated", "data": {"object": {"id": dispute_id}}}
    )


# --- item 1: a dispute is recorded as Stripe shows it --------------------------------------------


def entry(dispute_id: str, charge_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "dispute_id": dispute_id,
        "charge_id": charge_id,
        "amount_micro": 10_000_000,
        "reason": "fraudulent",
        **changes,
    }


def test_a_dispute_typed_on_another_buyers_charge_is_refused_and_nothing_is_recorded(
    alice: Api, bob: Api, stripe_at_sandbox: SandboxControl
) -> None:
    """Alice's charge was refunded in full (her signed receipts would prove refund_already_sent);
    Stripe's dispute is on Bob's unrefunded charge. Typing Alice's charge id is refused with each
    field typed against Stripe's, and nothing is recorded; the right charge is recorded."""
    alices = World(alice, stripe_at_sandbox)
    alices.fund()
    alices.refund(10_000_000)
    bobs = World(bob, stripe_at_sandbox)
    bobs.fund()
    opened = stripe_at_sandbox.open_dispute(bobs.charge_id, reason="fraudulent")
    clerk = Api(staff_user("clerk", *CLERK))

    typed = clerk.post("/api/v1/disputes", entry(opened["id"], alices.charge_id))
    assert typed.status_code == 409, typed.content
    error = typed.json()["error"]
    assert error["code"] == "dispute_mismatch"
    assert error["details"]["fields"]["charge_id"] == {
        "typed": alices.charge_id,
        "provider": bobs.charge_id,
    }
    assert set(error["details"]["fields"]) == {"charge_id"}
    assert not Dispute.objects.exists()
    assert not Packet.objects.exists()
    assert at_provider(stripe_at_sandbox, opened["id"])["evidence_details"]["submission_count"] == 0

    wrong = clerk.post(
        "/api/v1/disputes", entry(opened["id"], bobs.charge_id, reason="duplicate", amount_micro=1)
    )
    assert wrong.status_code == 400  # not whole cents: the input is refused first
    wrong = clerk.post(
        "/api/v1/disputes",
        entry(opened["id"], bobs.charge_id, reason="duplicate", amount_micro=20_000),
    )
    assert wrong.status_code == 409
    assert set(wrong.json()["error"]["details"]["fields"]) == {"amount_micro", "reason"}
    assert not Dispute.objects.exists()

    right = clerk.post("/api/v1/disputes", entry(opened["id"], bobs.charge_id))
    assert right.status_code == 201, right.content
    recorded = Dispute.objects.get()
    assert (recorded.charge_id, recorded.amount_micro, recorded.reason) == (
        bobs.charge_id,
        10_000_000,
        "fraudulent",
    )
    assert recorded.provider_status == "needs_response"  # as Stripe shows it
    packet = current(recorded)
    assert packet.posture != "refund_already_sent"  # Bob's charge was never refunded


def test_an_unknown_dispute_id_is_refused_and_an_unanswered_read_records_no_guess(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    clerk = Api(staff_user("clerk", *CLERK))
    unknown = clerk.post("/api/v1/disputes", entry("dp_not_at_the_provider", "ch_unknown"))
    assert unknown.status_code == 404, unknown.content
    assert unknown.json()["error"]["code"] == "dispute_not_at_provider"
    assert not Dispute.objects.exists()

    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="fraudulent")
    stripe_at_sandbox.add_fault(f"/v1/disputes/{opened['id']}", "server_error", method="GET")
    unread = clerk.post("/api/v1/disputes", entry(opened["id"], world.charge_id), key="enter-1")
    assert unread.status_code == 503, unread.content
    assert unread.json()["error"]["code"] == "dispute_read_unavailable"
    assert not Dispute.objects.exists()
    stripe_at_sandbox.clear_faults()
    # Nothing was kept under the key: the same request, retried, records the dispute.
    again = clerk.post("/api/v1/disputes", entry(opened["id"], world.charge_id), key="enter-1")
    assert again.status_code == 201, again.content
    assert Dispute.objects.get().charge_id == world.charge_id


def test_the_filing_readback_is_contradicted_by_a_dispute_on_another_charge(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = file(approve(contest_ready(world, ops), ops), ops)
    run = VerificationRun.objects.get(pk=packet.filing_run_id)
    assert run.input["charge"] == world.charge_id
    contract = get_contract("stripe.dispute.filed")
    observed = {
        "dispute_readback": {
            "id": "dp_1",
            "charge": "ch_bob",
            "status": "under_review",
            "evidence_details": {"submission_count": 1, "submission_method": "manual"},
            "metadata": {"vouch_packet_digest": "abc"},
        }
    }
    start = timezone.now() - timedelta(minutes=5)  # past the stale-read window
    context = Context(
        observed=observed,
        action_result={"id": "dp_1"},
        input={"dispute": "dp_1", "packet_digest": "abc", "charge": "ch_alice"},
        operation_id="pkt_1:abc",
        operation_created_at=start,
    )
    decision = decide(contract, context, now=timezone.now(), skew_s=0)
    assert decision.verdict == Verdict.CONTRADICTED, decision.reason
    observed["dispute_readback"]["charge"] = "ch_alice"
    assert decide(contract, context, now=timezone.now(), skew_s=0).verdict == Verdict.VERIFIED
    # And the real readback of this filing, on its own charge, verifies.
    assert settle_runs()[run.pk] == "VERIFIED"


# --- item 2: filing re-reads the facts it rests on ------------------------------------------------


def refund_already_sent(world: World, ops: Ops) -> Packet:
    """A $10 charge refunded in full (verified, receipted), then disputed: an approved
    refund_already_sent version citing that refund's receipt."""
    world.fund(10_000_000)
    world.refund(10_000_000)
    dispute = world.dispute(reason="fraudulent", amount_cents=1000)
    packet = current(dispute)
    assert packet.posture == "refund_already_sent", packet.validation
    return approve(packet, ops)


def deliver_refund_failed(refund_id: str) -> None:
    body = {
        "id": f"evt_failed_{refund_id}",
        "type": "refund.failed",
        "created": 1,
        "data": {"object": {"id": refund_id}},
    }
    stored, _ = provider_event_store(event=body, raw=json.dumps(body))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


@pytest.mark.parametrize("noticed", [True, False], ids=["refund.failed noticed", "not yet"])
def test_an_approved_refund_already_sent_whose_refund_failed_is_prepared_again_not_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, noticed: bool
) -> None:
    approved = refund_already_sent(world, ops)
    leg = RefundLeg.objects.get()
    stripe_at_sandbox.set_refund_status(
        leg.provider_refund_id, "failed", "expired_or_canceled_card"
    )
    if noticed:  # Vouch heard of it: the leg released, a reversal receipt written
        deliver_refund_failed(leg.provider_refund_id)
        assert ProviderEvent.objects.filter(type="refund.failed").exists()
        assert RefundLeg.objects.get().released is True
    dispute_id = approved.dispute.provider_dispute_id

    with pytest.raises(PacketFactsChanged) as refused:
        file(Packet.objects.get(pk=approved.pk), ops)
    assert refused.value.code == "packet_facts_changed"
    changed = refused.value.details["changed"]
    assert any(c["fact"] == "refund" and leg.provider_refund_id in c["message"] for c in changed)

    # The approval is void: a new version, prepared from the facts as they are now.
    old = Packet.objects.get(pk=approved.pk)
    assert (old.status, old.filing_status, old.provider_status) == (
        "superseded",
        "not_filed",
        "not_called",
    )
    new = current(old.dispute)
    assert new.version == old.version + 1
    assert refused.value.details["new_version"] == new.public_id
    assert new.approval_status == "not_requested"
    # Whether Vouch had heard of it or not: filing read it, released the leg through the one
    # release service (the money back in the envelope), and the new version no longer claims it.
    assert RefundLeg.objects.get().released is True
    assert new.posture != "refund_already_sent"
    assert AuditEvent.objects.filter(action="packet.facts_changed").count() == 1
    # Nothing was sent to Stripe: no evidence, no submission, no readback run.
    held = at_provider(stripe_at_sandbox, dispute_id)
    assert held["evidence_details"]["submission_count"] == 0
    assert not held["evidence"]["uncategorized_text"]
    assert not VerificationRun.objects.filter(contract_id__startswith="stripe.dispute").exists()


def test_a_new_refund_recorded_since_the_approval_of_a_contest_voids_it(
    world: World, ops: Ops, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    """An inquiry contested and approved, then a refund of its charge (an inquiry's charge stays
    refundable) made in the Dashboard and recorded under four eyes: a fact the contest did not
    rest on. Filing refuses and prepares again."""
    world.fund()
    opened = stripe_at_sandbox.open_dispute(
        world.charge_id, reason="product_not_received", status="warning_needs_response"
    )
    event(opened["id"])
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("doc:1", "delivery"))
    approved = approve(current(dispute), ops)
    assert approved.posture == "contest"
    adjustment = record_dashboard_refund(world, sdk, amount_cents=300)
    with pytest.raises(PacketFactsChanged) as refused:
        file(Packet.objects.get(pk=approved.pk), ops)
    assert any(adjustment.public_id in c["message"] for c in refused.value.details["changed"])
    new = current(dispute)
    assert new.posture == "operator_review"
    assert adjustment.public_id in new.citations
    held = at_provider(stripe_at_sandbox, opened["id"])
    assert held["evidence_details"]["submission_count"] == 0


# --- item 3: the network fee acknowledged on every posture Stripe requires it on ------------------


def test_a_refund_already_sent_answer_to_a_visa_compliance_dispute_is_filed_with_the_fee(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    world.refund(10_000_000)
    dispute = world.dispute(reason="noncompliant", amount_cents=1000)
    assert dispute.enhanced_eligibility_types == ["visa_compliance"]
    packet = current(dispute)
    assert packet.posture == "refund_already_sent"
    with pytest.raises(FeeNotAcknowledged):
        approve(packet, ops)
    approved = approve(packet, ops, fee_acknowledged=True)
    assert approved.fee_acknowledged is True
    sent = file(approved, ops)
    assert sent.filing_status == "awaiting_readback", sent.filing_error
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    held = at_provider(stripe_at_sandbox, dispute.provider_dispute_id)
    assert held["evidence"]["enhanced_evidence"]["visa_compliance"]["fee_acknowledged"] is True
    assert held["evidence_details"]["submission_count"] == 1


# --- item 4: a refund recorded by four-eyes adjustment counts as a refund -------------------------


@pytest.mark.parametrize(
    ("cents", "posture"), [(1000, "refund_already_sent"), (300, "operator_review")]
)
def test_a_dashboard_refund_recorded_by_adjustment_counts_as_a_refund(
    world: World,
    ops: Ops,
    sdk: stripe.StripeClient,
    stripe_at_sandbox: SandboxControl,
    cents: int,
    posture: str,
) -> None:
    world.fund(10_000_000)
    adjustment = record_dashboard_refund(world, sdk, amount_cents=cents)
    dispute = world.dispute(reason="product_not_received", amount_cents=1000)
    packet = current(dispute)
    assert packet.posture == posture, (packet.summary, packet.validation)
    assert packet.validation["ok"] is True
    assert adjustment.public_id in packet.citations
    assert adjustment.public_id in packet.receipt_ids
    rows = {row.citation: row.kind for row in citation_rows(packet)}
    assert rows[adjustment.public_id] == "adjustment"  # the review page says what it is
    # A person cannot contest it as if never refunded.
    edited = services.packet_edit(
        packet=packet,
        actor=ops.preparer,
        changes={"posture": "contest", "citations": [packet.citations[0]]},
    )
    assert "prior_refund_ignored" in [e["code"] for e in edited.validation["errors"]]


def test_a_refund_already_sent_citing_an_adjustment_is_filed_and_verified(
    world: World, ops: Ops, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    adjustment = record_dashboard_refund(world, sdk, amount_cents=1000)
    dispute = world.dispute(reason="fraudulent", amount_cents=1000)
    packet = approve(current(dispute), ops)
    assert packet.posture == "refund_already_sent"
    assert adjustment.public_id in packet.handoff["request"]["evidence"]["uncategorized_text"]
    sent = file(packet, ops)
    assert sent.filing_status == "awaiting_readback"
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


# --- the outcome figures take fees from Stripe's balance transactions ----------------------------


def test_the_outcome_fees_are_stripes_balance_transaction_fees_where_they_exist(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """A contested chargeback lost: the fee table says dispute fee + lost-dispute fee ($30);
    Stripe's balance transactions show the $15 it took. The figures take Stripe's."""
    packet = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    dispute = Dispute.objects.get(pk=packet.dispute_id)
    assert dispute.provider_fees_micro == 15_000_000  # the withdrawal's fee, 1500 cents
    stripe_at_sandbox.set_dispute_status(dispute.provider_dispute_id, "lost")
    event(dispute.provider_dispute_id)
    outcomes = dispute_outcomes()
    assert (outcomes.total.lost, outcomes.total.fees_micro) == (1, 15_000_000)
    # Where Stripe shows none, the table: the same dispute without its balance transactions.
    Dispute.objects.filter(pk=dispute.pk).update(provider_fees_micro=None)
    assert dispute_outcomes().total.fees_micro == 30_000_000


def test_an_inquiry_shows_no_balance_transaction_fees(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    assert dispute.provider_fees_micro == 15_000_000
    world2 = World(world.buyer, stripe_at_sandbox)
    world2.fund()
    opened = stripe_at_sandbox.open_dispute(
        world2.charge_id, reason="fraudulent", status="warning_needs_response"
    )
    event(opened["id"])
    assert Dispute.objects.get(provider_dispute_id=opened["id"]).provider_fees_micro is None
