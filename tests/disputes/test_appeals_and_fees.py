"""SPEC §17 through the services against the sandbox: an appeal of a lost dispute (its own version,
approval, stage check at the provider, filing and readback contract), and a Visa compliance
dispute's network fee (acknowledged with the approval, or nothing is filed)."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from core.models import AuditEvent
from disputes import services
from disputes.exceptions import (
    AppealNotEditable,
    AppealNotPossible,
    AppealStageClosed,
    ApproverIsContributor,
    FeeNotAcknowledged,
    PacketAlreadyFiled,
    PacketInvalid,
)
from disputes.models import Dispute, Packet
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import (
    Ops,
    World,
    admit_file,
    approve,
    contest_ready,
    evidence,
    file,
    pdf,
)
from tests.helpers import settle_runs
from verification.models import VerificationRun


def read_dispute(sandbox: SandboxControl, dispute_id: str) -> Any:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def event(dispute_id: str) -> None:
    """What the webhook does: re-read the dispute and record what the provider says of it."""
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.updated", "data": {"object": {"id": dispute_id}}}
    )


def filed_and_lost(world: World, ops: Ops, sandbox: SandboxControl) -> Packet:
    """A contested response filed (readback verified), then the dispute lost, appeal-eligible."""
    packet = file(approve(contest_ready(world, ops), ops), ops)
    settle_runs()
    packet = Packet.objects.get(pk=packet.pk)
    assert packet.filing_status == "filed"
    dispute_id = packet.dispute.provider_dispute_id
    sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    event(dispute_id)
    return packet


def test_an_appeal_is_its_own_version_approval_filing_and_readback(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, media: Any
) -> None:
    response = filed_and_lost(world, ops, stripe_at_sandbox)
    dispute = Dispute.objects.get(pk=response.dispute_id)
    assert (dispute.provider_status, dispute.decided_at is not None) == ("lost", True)
    dispute_id = dispute.provider_dispute_id

    # Nothing new admitted: the appeal version says so and cannot be approved.
    bare = services.appeal_prepare(dispute=dispute, requested_by=ops.preparer)
    assert (bare.kind, bare.status, bare.appeal["new_evidence"]) == ("appeal", "incomplete", [])
    assert bare.appeal["based_on"] == {
        "packet": response.public_id,
        "version": response.version,
        "digest": response.approved_digest,
    }

    admit_file(dispute, ops.preparer, "doc:courier", "delivery", pdf("Courier photo"))
    appeal = services.appeal_prepare(dispute=dispute, requested_by=ops.preparer)
    assert (appeal.kind, appeal.status, appeal.version) == ("appeal", "ready_for_review", 4)
    assert appeal.appeal["new_evidence"] == ["doc:courier"]
    assert Packet.objects.get(pk=bare.pk).status == "superseded"
    assert Packet.objects.get(pk=response.pk).status == "filed"  # the response is left as it is
    # Only Stripe's appeal is sent: the response's evidence is frozen.
    request = appeal.handoff["request"]
    assert set(request["evidence"]) == {"appeal"}
    assert request["metadata"] == {"vouch_appeal_digest": appeal.digest}
    # Stripe's shape: `evidence[appeal][card][reason_for_filing|supporting_files]`.
    assert set(request["evidence"]["appeal"]) == {"card"}
    card = request["evidence"]["appeal"]["card"]
    assert "doc:courier" in card["reason_for_filing"]
    assert [f["file"]["ref"] for f in card["supporting_files"]] == ["doc:courier"]

    with pytest.raises(ApproverIsContributor):
        services.packet_approve(packet=appeal, actor=ops.preparer, confirmed_digest=appeal.digest)
    appeal = approve(appeal, ops)

    # The provider does not hold the dispute in its appeal stage yet: read first, nothing sent.
    with pytest.raises(AppealStageClosed) as refused:
        file(appeal, ops)
    assert refused.value.details["provider_read"]["status"] == "lost"
    assert read_dispute(stripe_at_sandbox, dispute_id)["evidence"]["appeal"] is None
    assert Packet.objects.get(pk=appeal.pk).filing_status == "not_filed"

    stripe_at_sandbox.appeal_dispute(dispute_id)
    sent = file(Packet.objects.get(pk=appeal.pk), ops)
    assert (sent.filing_status, sent.provider_status) == ("awaiting_readback", "answered")
    assert sent.filing_run is not None
    assert sent.filing_run.contract_id == "stripe.dispute.appeal_filed"
    audit = AuditEvent.objects.get(action="packet.file", target_id=appeal.public_id)
    assert audit.details["provider_read"]["status"] == "appeal_needs_response"

    verdicts = settle_runs()
    assert verdicts[sent.filing_run.pk] == "VERIFIED"
    filed = Packet.objects.get(pk=appeal.pk)
    assert (filed.status, filed.filing_status) == ("filed", "filed")
    at_provider = read_dispute(stripe_at_sandbox, dispute_id)
    assert at_provider["status"] == "appeal_under_review"
    assert at_provider["metadata"]["vouch_appeal_digest"] == appeal.digest
    assert at_provider["metadata"]["vouch_packet_digest"] == response.approved_digest
    held = at_provider["evidence"]["appeal"]["card"]
    assert appeal.summary in held["reason_for_filing"]
    assert held["supporting_files"] == list(Packet.objects.get(pk=appeal.pk).filing_files.values())
    assert at_provider["evidence_details"]["submission_count"] == 2
    # One appeal per dispute: nothing else of kind appeal is prepared or filed now.
    with pytest.raises(PacketAlreadyFiled):
        services.appeal_prepare(dispute=dispute, requested_by=ops.preparer)

    # The appeal's decision moves the dispute's decision time (the outcome figures' month).
    first_decision = Dispute.objects.get(pk=dispute.pk).decided_at
    stripe_at_sandbox.set_dispute_status(dispute_id, "won")
    event(dispute_id)
    decided = Dispute.objects.get(pk=dispute.pk)
    assert decided.provider_status == "won"
    assert first_decision is not None
    assert decided.decided_at is not None
    assert decided.decided_at > first_decision


def test_an_appeal_needs_a_filed_response_and_a_loss(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = contest_ready(world, ops)
    with pytest.raises(AppealNotPossible):  # nothing filed
        services.appeal_prepare(dispute=packet.dispute, requested_by=ops.preparer)
    filed = file(approve(packet, ops), ops)
    settle_runs()
    event(filed.dispute.provider_dispute_id)
    dispute = Dispute.objects.get(pk=filed.dispute_id)
    with pytest.raises(AppealNotPossible) as refused:  # filed, but not lost
        services.appeal_prepare(dispute=dispute, requested_by=ops.preparer)
    assert refused.value.details == {"provider_status": "under_review"}
    assert not dispute.packets.filter(kind="appeal").exists()


def test_an_appeal_edit_changes_only_its_reason_and_the_editor_cannot_approve(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    response = filed_and_lost(world, ops, stripe_at_sandbox)
    services.evidence_admit(
        dispute=response.dispute,
        actor=ops.preparer,
        data=evidence("doc:chat", "communication", "The buyer confirmed receipt by chat"),
    )
    appeal = services.appeal_prepare(dispute=response.dispute, requested_by=None)
    with pytest.raises(AppealNotEditable):
        services.packet_edit(packet=appeal, actor=ops.approver, changes={"posture": "accept"})
    editor = ops.approver
    editor.user_permissions.add(*ops.preparer.user_permissions.filter(codename="change_packet"))
    editor = type(editor).objects.get(pk=editor.pk)
    edited = services.packet_edit(
        packet=appeal, actor=editor, changes={"summary": "The bank overlooked the chat log."}
    )
    assert edited.summary == "The bank overlooked the chat log."
    assert edited.digest != appeal.digest
    assert edited.posture == "contest"
    assert (
        "The bank overlooked the chat log."
        in (edited.handoff["request"]["evidence"]["appeal"]["card"]["reason_for_filing"])
    )
    with pytest.raises(ApproverIsContributor):
        services.packet_approve(packet=edited, actor=editor, confirmed_digest=edited.digest)


def test_a_compliance_dispute_is_filed_only_with_the_fee_acknowledged(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = contest_ready(world, ops, reason="noncompliant")
    dispute = packet.dispute
    assert dispute.enhanced_eligibility_types == ["visa_compliance"]
    assert packet.costs["visa_compliance_fee_micro"] == 500_000_000
    assert "fee_acknowledged" not in str(packet.handoff["request"])

    with pytest.raises(FeeNotAcknowledged):
        approve(packet, ops)
    assert Packet.objects.get(pk=packet.pk).approval_status == "not_requested"

    approved = approve(packet, ops, fee_acknowledged=True)
    assert (approved.approval_status, approved.fee_acknowledged) == ("approved", True)
    event_row = AuditEvent.objects.get(action="packet.approve", target_id=packet.public_id)
    assert event_row.details["fee_acknowledged"] is True

    sent = file(approved, ops)
    assert sent.filing_status == "awaiting_readback"
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    at_provider = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)
    enhanced = at_provider["evidence"]["enhanced_evidence"]
    assert enhanced["visa_compliance"]["fee_acknowledged"] is True
    assert (
        at_provider["evidence_details"]["enhanced_eligibility"]["visa_compliance"]["status"]
        == "fee_acknowledged"
    )


def test_an_approval_without_the_acknowledgement_is_never_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """An approval row that lacks the acknowledgement (made before the rule, or by hand) is
    refused at filing, before anything is reserved or sent."""
    packet = approve(contest_ready(world, ops, reason="noncompliant"), ops, fee_acknowledged=True)
    Packet.objects.filter(pk=packet.pk).update(fee_acknowledged=False)
    with pytest.raises(FeeNotAcknowledged):
        file(Packet.objects.get(pk=packet.pk), ops)
    stored = Packet.objects.get(pk=packet.pk)
    assert (stored.filing_status, stored.provider_status) == ("not_filed", "not_called")
    at_provider = read_dispute(stripe_at_sandbox, packet.dispute.provider_dispute_id)
    assert at_provider["evidence_details"]["submission_count"] == 0
    assert not VerificationRun.objects.filter(contract_id__startswith="stripe.dispute").exists()


def test_a_response_packet_shows_the_cost_of_each_posture(world: World, ops: Ops) -> None:
    packet = contest_ready(world, ops)
    costs = packet.costs
    assert costs["amount_micro"] == packet.dispute.amount_micro == 10_000_000
    assert costs["accept_micro"] == -(10_000_000 + costs["dispute_fee_micro"])
    assert costs["contest_won_micro"] == -costs["dispute_fee_micro"]
    assert costs["visa_compliance_fee_micro"] == 0
    # The digest binds what the approver is shown of the cost.
    before = packet.digest
    Packet.objects.filter(pk=packet.pk).update(costs={**costs, "accept_micro": 0})
    changed = Packet.objects.select_related("dispute").get(pk=packet.pk)
    assert services.packet_digest(changed) != before


def test_an_appeal_that_claims_an_outcome_is_invalid_and_cannot_be_approved(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    response = filed_and_lost(world, ops, stripe_at_sandbox)
    services.evidence_admit(
        dispute=response.dispute,
        actor=ops.preparer,
        data=evidence("doc:chat", "communication", "The buyer confirmed receipt by chat"),
    )
    appeal = services.appeal_prepare(dispute=response.dispute, requested_by=ops.preparer)
    # Saying the response was filed is proven (its readback); saying the appeal is won is not.
    fine = services.packet_edit(
        packet=appeal,
        actor=ops.preparer,
        changes={"summary": "Our response was filed with the courier's record; see the chat."},
    )
    assert (fine.status, fine.validation["ok"]) == ("ready_for_review", True)
    claimed = services.packet_edit(
        packet=fine, actor=ops.preparer, changes={"summary": "This dispute is won: see the chat."}
    )
    assert claimed.status == "invalid"
    assert [e["code"] for e in claimed.validation["errors"]] == ["effect_claim"]
    with pytest.raises(PacketInvalid):
        services.packet_approve(packet=claimed, actor=ops.approver, confirmed_digest=claimed.digest)
