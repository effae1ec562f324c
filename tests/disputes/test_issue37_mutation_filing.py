"""Issue 37's mutation round for disputes/services/filing.py (bench/MUTATION.md): the facts an
approved response rests on, read again when it is filed (SPEC §18), value by value: what the person
filing is told for each fact that changed, what is audited, which reads refuse to send on a guess,
which packets are not read at all, and the filing key's and permission's bounds."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from core.exceptions import InvalidInput, PermissionDenied
from core.models import AuditEvent
from disputes import services
from disputes.exceptions import (
    DisputeReadUnavailable,
    DisputeResponseNotAllowed,
    FilingKeyConflict,
    PacketFactsChanged,
    PacketNotApproved,
)
from disputes.models import Dispute, Packet
from disputes.services.filing import _facts_void
from envelopes.models import Adjustment, JournalEntry, RefundLeg
from receipts.models import Receipt
from receipts.selectors import receipt_tree
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import (
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
from verification.models import VerificationRun

VOID = (
    "A fact this packet rests on changed since it was approved: {said} It was prepared again{as_}, "
    "which needs a new approval. Nothing was sent to the provider."
)


def nothing_sent(sandbox: SandboxControl, dispute: Dispute) -> None:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    held = client.v1.disputes.retrieve(dispute.provider_dispute_id)
    assert held["evidence_details"]["submission_count"] == 0
    assert not VerificationRun.objects.filter(contract_id__startswith="stripe.dispute").exists()


def still_approved(packet: Packet) -> None:
    """The refusal changed nothing: the same version, approved, not filed, no other version."""
    again = Packet.objects.get(pk=packet.pk)
    assert (again.status, again.approval_status, again.filing_status) == (
        packet.status,
        "approved",
        "not_filed",
    )
    assert current(again.dispute).pk == packet.pk
    assert not AuditEvent.objects.filter(action="packet.facts_changed").exists()


def inquiry_contest(world: World, ops: Ops) -> Packet:
    """An inquiry (its charge stays refundable) contested with delivery evidence and approved."""
    world.fund()
    opened = world.sandbox.open_dispute(
        world.charge_id, reason="product_not_received", status="warning_needs_response"
    )
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
    )
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("doc:1", "delivery"))
    approved = approve(current(dispute), ops)
    assert approved.posture == "contest"
    return approved


def refused_filing(packet: Packet, ops: Ops) -> PacketFactsChanged:
    with pytest.raises(PacketFactsChanged) as refused:
        file(Packet.objects.get(pk=packet.pk), ops)
    return refused.value


# --- the provider's facts -------------------------------------------------------------------------


def test_a_dispute_stripe_now_shows_on_another_charge_and_amount_voids_the_approval(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = contest_ready(world, ops)
    approved = approve(approved, ops)
    dispute = approved.dispute
    stripe_at_sandbox.tamper(dispute.provider_dispute_id, charge="ch_someone_else", amount=2000)

    refusal = refused_filing(approved, ops)
    charge = (
        f"The provider shows dispute {dispute.provider_dispute_id} on charge ch_someone_else, "
        f"not on {world.charge_id} the packet answers for."
    )
    amount = "The provider shows the dispute of 20000000 micro usd, not 10000000 micro usd."
    changed = [{"fact": "charge", "message": charge}, {"fact": "amount", "message": amount}]
    assert refusal.details["changed"] == changed
    new = current(dispute)
    assert new.version == approved.version + 1
    as_ = f" as version {new.version}"
    assert refusal.message == VOID.format(said=f"{charge} {amount}", as_=as_)
    assert refusal.details == {"changed": changed, "new_version": new.public_id}
    audit = AuditEvent.objects.get(action="packet.facts_changed")
    assert (audit.actor_id, audit.target_type, audit.target_id) == (
        ops.filer.pk,
        "packet",
        approved.public_id,
    )
    assert audit.details == {
        "changed": changed,
        "approved_digest": approved.approved_digest,
        "new_version": new.public_id,
    }
    assert Packet.objects.get(pk=approved.pk).status == "superseded"
    assert new.approval_status == "not_requested"
    prepared = AuditEvent.objects.get(action="packet.prepare", target_id=new.public_id)
    assert prepared.details["trigger"] == "facts_changed"
    nothing_sent(stripe_at_sandbox, dispute)


def test_a_void_that_finds_the_version_superseded_already_prepares_no_other(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Two people pressed File at once: the second void finds the version superseded by the first
    and only says what changed."""
    approved = approve(contest_ready(world, ops), ops)
    stripe_at_sandbox.tamper(approved.dispute.provider_dispute_id, amount=2000)
    first = refused_filing(approved, ops)
    versions = approved.dispute.packets.count()
    changes = first.details["changed"]
    second = _facts_void(Packet.objects.get(pk=approved.pk), actor=ops.filer, changes=changes)
    assert isinstance(second, PacketFactsChanged)
    said = changes[0]["message"]
    assert second.message == VOID.format(said=said, as_="")
    assert second.details == {"changed": changes, "new_version": None}
    assert approved.dispute.packets.count() == versions
    assert AuditEvent.objects.filter(action="packet.facts_changed").count() == 1


def test_an_unanswered_dispute_read_at_filing_sends_nothing_and_keeps_the_approval(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = approve(contest_ready(world, ops), ops)
    dispute = approved.dispute
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute.provider_dispute_id}", "server_error", method="GET"
    )
    with pytest.raises(DisputeReadUnavailable) as refused:
        file(approved, ops)
    assert refused.value.message == (
        "The provider's dispute could not be read to check the facts this packet rests on: "
        "nothing was sent. Try again."
    )
    assert set(refused.value.details) == {"read", "request_id"}
    assert refused.value.details["read"] not in ("", "unknown")
    still_approved(approved)
    stripe_at_sandbox.clear_faults()
    nothing_sent(stripe_at_sandbox, dispute)


def test_a_packet_that_is_not_an_approved_new_response_is_refused_before_anything_is_read(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Reading the facts is for an approved response not filed yet: anything else gets its own
    refusal, even while the provider's dispute cannot be read."""
    ready = contest_ready(world, ops)
    dispute = ready.dispute
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute.provider_dispute_id}", "server_error", method="GET"
    )
    with pytest.raises(PacketNotApproved):
        file(ready, ops)
    stripe_at_sandbox.clear_faults()
    sent = file(approve(ready, ops), ops)
    assert sent.filing_status == "awaiting_readback", sent.filing_error
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute.provider_dispute_id}", "server_error", method="GET"
    )
    with pytest.raises(FilingKeyConflict):
        services.packet_file(
            packet=sent, actor=ops.filer, confirmed_digest=sent.digest, idempotency_key="other"
        )


def refund_already_sent(world: World, ops: Ops) -> Packet:
    world.fund(10_000_000)
    world.refund(10_000_000)
    packet = current(world.dispute(reason="fraudulent", amount_cents=1000))
    assert packet.posture == "refund_already_sent", packet.validation
    return approve(packet, ops)


def test_an_unanswered_read_of_a_cited_refund_sends_nothing_and_keeps_the_approval(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = refund_already_sent(world, ops)
    refund_id = RefundLeg.objects.get().provider_refund_id
    stripe_at_sandbox.add_fault(f"/v1/refunds/{refund_id}", "server_error", method="GET")
    with pytest.raises(DisputeReadUnavailable) as refused:
        file(approved, ops)
    assert refused.value.message == (
        f"The refund {refund_id} the packet cites could not be read from the provider: "
        "nothing was sent. Try again."
    )
    assert set(refused.value.details) == {"refund", "read"}
    assert refused.value.details["refund"] == refund_id
    assert refused.value.details["read"] not in ("", "unknown")
    still_approved(approved)
    assert RefundLeg.objects.get().released is False
    stripe_at_sandbox.clear_faults()
    nothing_sent(stripe_at_sandbox, approved.dispute)


def test_a_failed_refund_of_a_vouch_refund_is_said_by_the_provider_and_the_ledger(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = refund_already_sent(world, ops)
    leg = RefundLeg.objects.get()
    receipt = Receipt.objects.get(kind="refund")
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    refusal = refused_filing(approved, ops)
    rid = leg.provider_refund_id
    assert refusal.details["changed"] == [
        {
            "fact": "refund",
            "message": f"The provider shows the refund {rid} ({receipt.id}) failed: the money "
            "did not reach the cardholder.",
        },
        {
            "fact": "refund",
            "message": f"The refund {rid} ({receipt.id}) no longer stands: it failed, was "
            "reversed or was given back since the approval.",
        },
    ]
    assert RefundLeg.objects.get().released is True
    release = JournalEntry.objects.get(kind="release", refund_leg=leg)
    assert release.note == "provider reports failed"
    nothing_sent(stripe_at_sandbox, approved.dispute)


def test_a_failed_refund_recorded_by_adjustment_is_released_and_said_by_both(
    world: World, ops: Ops, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund(10_000_000)
    adjustment = record_dashboard_refund(world, sdk, amount_cents=1000)
    approved = approve(current(world.dispute(reason="fraudulent", amount_cents=1000)), ops)
    assert approved.posture == "refund_already_sent"
    rid = adjustment.provider_object_id
    stripe_at_sandbox.set_refund_status(rid, "failed", "expired_or_canceled_card")
    refusal = refused_filing(approved, ops)
    adj = adjustment.public_id
    assert refusal.details["changed"] == [
        {
            "fact": "refund",
            "message": f"The provider shows the refund {rid} ({adj}) failed: the money did not "
            "reach the cardholder.",
        },
        {
            "fact": "refund",
            "message": f"The refund {rid} ({adj}) no longer stands: it failed, was reversed or "
            "was given back since the approval.",
        },
    ]
    assert Adjustment.objects.get(pk=adjustment.pk).released_at is not None
    release = AuditEvent.objects.get(action="adjustment.release")
    assert (release.details["adjustment"], release.details["source"]) == (
        adj,
        "dispute filing facts",
    )
    new = current(approved.dispute)
    assert new.posture != "refund_already_sent"
    assert adj not in new.citations
    nothing_sent(stripe_at_sandbox, approved.dispute)


# --- the ledger's facts ---------------------------------------------------------------------------


def test_a_refund_made_through_vouch_since_the_approval_is_a_new_refund(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = inquiry_contest(world, ops)
    world.refund(3_000_000)
    receipt = Receipt.objects.get(kind="refund")
    refusal = refused_filing(approved, ops)
    assert refusal.details["changed"] == [
        {
            "fact": "new_refund",
            "message": f"A refund {receipt.provider_object_id} ({receipt.id}) was recorded on "
            f"charge {world.charge_id} since the approval.",
        }
    ]
    nothing_sent(stripe_at_sandbox, approved.dispute)


def test_a_refund_still_undecided_since_the_approval_says_the_tree_is_incomplete(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = inquiry_contest(world, ops)
    world.refund(3_000_000, settle=False)  # its verification run is still pending
    leg = RefundLeg.objects.get()
    tree = receipt_tree(charge_id=world.charge_id)
    problems = [*tree.problems, f"refund_leg_undecided: {leg.public_id}"]
    assert len(problems) >= 2  # so the joiner shows
    refusal = refused_filing(approved, ops)
    assert refusal.details["changed"] == [
        {
            "fact": "receipts",
            "message": "The charge's receipt tree is no longer complete: "
            + "; ".join(problems)
            + ".",
        }
    ]


def test_a_receipt_no_longer_trusted_since_the_approval_is_said(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    approved = approve(contest_ready(world, ops), ops)
    charge = Receipt.objects.get(kind="charge", provider_object_id=world.charge_id)
    assert charge.id in approved.receipt_ids
    settings.RECEIPT_TRUSTED_KEYS = {
        k: v for k, v in settings.RECEIPT_TRUSTED_KEYS.items() if k != charge.key_id
    }
    tree = receipt_tree(charge_id=world.charge_id)
    refusal = refused_filing(approved, ops)
    assert refusal.details["changed"] == [
        {
            "fact": "receipts",
            "message": f"The receipt {charge.id} is no longer trusted or present.",
        },
        {
            "fact": "receipts",
            "message": "The charge's receipt tree is no longer complete: "
            + "; ".join(tree.problems)
            + ".",
        },
    ]


# --- the filing key and the permission ------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "   ", "k" * 256, "a\nb"])
def test_a_filing_key_outside_1_to_255_printable_characters_is_refused(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, key: str
) -> None:
    approved = approve(contest_ready(world, ops), ops)
    with pytest.raises(InvalidInput) as refused:
        services.packet_file(
            packet=approved, actor=ops.filer, confirmed_digest=approved.digest, idempotency_key=key
        )
    assert refused.value.message == "The filing key is 1-255 printable characters."
    still_approved(approved)


def test_a_filing_key_of_255_characters_and_the_permission_to_file(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    approved = approve(contest_ready(world, ops), ops)
    with pytest.raises(PermissionDenied) as refused:
        services.packet_file(
            packet=approved,
            actor=staff_user("nofile", "approve_packet"),
            confirmed_digest=approved.digest,
            idempotency_key="k",
        )
    assert refused.value.message == "This needs the permission disputes.file_packet."
    key = "k" * 255
    sent = services.packet_file(
        packet=approved, actor=ops.filer, confirmed_digest=approved.digest, idempotency_key=key
    )
    assert sent.filing_status == "awaiting_readback", sent.filing_error
    assert sent.filing_key == key
    # Pressing File again with its key repeats the filing under way: the same packet, answered.
    again = services.packet_file(
        packet=sent, actor=ops.filer, confirmed_digest=approved.digest, idempotency_key=key
    )
    assert (again.pk, again.filing_key) == (sent.pk, key)
    assert again.filing_status in ("awaiting_readback", "filed")


def test_a_dispute_no_response_is_allowed_to_is_refused_before_anything_is_read(
    world: World, ops: Ops, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl
) -> None:
    """The card network's due_by 0 arrived after the approval: filing refuses it at once, before
    the provider's dispute is read (here it could not be)."""
    approved = approve(contest_ready(world, ops), ops)
    dispute_id = approved.dispute.provider_dispute_id
    details = sdk.v1.disputes.retrieve(dispute_id)["evidence_details"].to_dict()
    stripe_at_sandbox.tamper(dispute_id, evidence_details={**details, "due_by": 0})
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.updated", "data": {"object": {"id": dispute_id}}}
    )
    assert Dispute.objects.get(pk=approved.dispute_id).response_allowed is False
    stripe_at_sandbox.add_fault(f"/v1/disputes/{dispute_id}", "server_error", method="GET")
    with pytest.raises(DisputeResponseNotAllowed):
        file(approved, ops)
    stripe_at_sandbox.clear_faults()
