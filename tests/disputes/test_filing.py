"""Approval and filing (SPEC §9): four eyes, digest binding, one submission per filing key, faults,
and `filed` only once the independent readback is VERIFIED."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
import stripe

from core.models import AuditEvent
from disputes import services
from disputes.exceptions import (
    ApproverIsContributor,
    FilingKeyConflict,
    PacketAlreadyFiled,
    PacketDrifted,
    PacketIncomplete,
    PacketInvalid,
    PacketNotApproved,
    PacketNotSubmitted,
    PacketReadbackFailed,
)
from disputes.models import Packet
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, contest_ready, current
from tests.helpers import settle_runs
from verification.models import VerificationRun


def approve(packet: Packet, ops: Ops) -> Packet:
    return services.packet_approve(
        packet=packet, actor=ops.approver, confirmed_digest=packet.digest
    )


def file(packet: Packet, ops: Ops, key: str | None = None) -> Packet:
    return services.packet_file(
        packet=packet,
        actor=ops.filer,
        confirmed_digest=packet.digest,
        idempotency_key=key or services.filing_key_proposal(packet),
    )


def submissions(sandbox: SandboxControl, dispute_id: str) -> int:
    """What the provider counts, read through the SDK (not through Vouch)."""
    return int(read_dispute(sandbox, dispute_id)["evidence_details"]["submission_count"])


def read_dispute(sandbox: SandboxControl, dispute_id: str) -> Any:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def test_the_preparer_cannot_approve_and_an_approval_records_the_digest(
    world: World, ops: Ops
) -> None:
    packet = contest_ready(world, ops)
    with pytest.raises(ApproverIsContributor):
        services.packet_approve(packet=packet, actor=ops.preparer, confirmed_digest=packet.digest)
    with pytest.raises(PacketDrifted):  # approving what was not shown
        services.packet_approve(packet=packet, actor=ops.approver, confirmed_digest="0" * 64)
    approved = approve(packet, ops)
    assert approved.approval_status == "approved"
    assert (approved.approved_by, approved.approved_digest) == (ops.approver, packet.digest)
    assert approved.digest == packet.digest  # approving does not change the digest
    event = AuditEvent.objects.get(action="packet.approve")
    assert (event.actor, event.details["digest"]) == (ops.approver, packet.digest)


def test_a_system_prepared_version_may_be_approved_by_any_approver(world: World, ops: Ops) -> None:
    world.fund(10_000_000)
    world.refund(10_000_000)
    dispute = world.dispute(reason="fraudulent", amount_cents=1000)
    packet = current(dispute)
    assert packet.posture == "refund_already_sent"
    assert approve(packet, ops).approval_status == "approved"


def test_an_edit_after_approval_makes_filing_fail_with_packet_drifted(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = approve(contest_ready(world, ops), ops)
    edited = services.packet_edit(
        packet=packet,
        actor=ops.preparer,
        changes={"summary": packet.summary + " The parcel was signed for."},
    )
    assert edited.digest != edited.approved_digest
    with pytest.raises(PacketDrifted):
        services.packet_file(
            packet=edited,
            actor=ops.filer,
            confirmed_digest=edited.digest,
            idempotency_key=services.filing_key_proposal(edited),
        )
    assert submissions(stripe_at_sandbox, edited.dispute.provider_dispute_id) == 0
    assert Packet.objects.get(pk=packet.pk).filing_status == "not_filed"


def test_filing_twice_with_one_key_makes_one_submission_and_filed_needs_the_readback(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = approve(contest_ready(world, ops), ops)
    dispute_id = packet.dispute.provider_dispute_id
    key = services.filing_key_proposal(packet)
    first = file(packet, ops, key)
    assert (first.filing_status, first.provider_status) == ("awaiting_readback", "answered")
    assert first.filing_request_digest
    assert first.filing_run is not None
    again = file(packet, ops, key)  # the same filing: the provider replays its answer
    assert again.filing_status == "awaiting_readback"
    assert submissions(stripe_at_sandbox, dispute_id) == 1
    assert VerificationRun.objects.filter(contract_id="stripe.dispute.filed").count() == 1
    with pytest.raises(FilingKeyConflict):
        file(packet, ops, "another-key")
    assert Packet.objects.get(pk=packet.pk).filing_status == "awaiting_readback"  # not yet filed

    verdicts = settle_runs()
    assert verdicts[first.filing_run.pk] == "VERIFIED"
    filed = Packet.objects.get(pk=packet.pk)
    assert filed.filing_status == "filed"
    assert filed.filed_at is not None
    with pytest.raises(PacketAlreadyFiled):
        file(filed, ops, key)
    at_provider = read_dispute(stripe_at_sandbox, dispute_id)
    assert at_provider["metadata"]["vouch_packet_digest"] == packet.digest
    assert packet.summary in at_provider["evidence"]["uncategorized_text"]


def test_apply_then_drop_on_filing_is_replayed_not_resubmitted(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = approve(contest_ready(world, ops), ops)
    dispute_id = packet.dispute.provider_dispute_id
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute_id}", "apply_then_drop", method="POST", times=1
    )
    filed = file(packet, ops)
    hits = [f for f in stripe_at_sandbox.faults() if f["kind"] == "apply_then_drop"]
    assert hits
    assert hits[0]["hits"] == 1
    assert submissions(stripe_at_sandbox, dispute_id) == 1
    assert filed.provider_status == "answered"  # the retry got the replayed answer
    assert filed.filing_status == "awaiting_readback"
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


def test_a_fault_during_filing_leaves_the_packet_not_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    packet = approve(contest_ready(world, ops), ops)
    dispute_id = packet.dispute.provider_dispute_id
    stripe_at_sandbox.add_fault(f"/v1/disputes/{dispute_id}", "server_error", method="POST")
    outcome = file(packet, ops)
    assert outcome.provider_status == "unknown"
    assert outcome.filing_status == "awaiting_readback"  # the readback decides, not the answer
    assert submissions(stripe_at_sandbox, dispute_id) == 0
    settle_runs(max_rounds=3)
    assert Packet.objects.get(pk=packet.pk).filing_status != "filed"
    assert outcome.filing_run is not None
    assert VerificationRun.objects.get(pk=outcome.filing_run.pk).verdict == "PENDING"


def test_refusals_before_anything_reaches_the_provider(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = contest_ready(world, ops)
    with pytest.raises(PacketNotApproved):
        file(packet, ops)
    world_dispute = packet.dispute
    review = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"posture": "operator_review"}
    )
    assert review.status == "ready_for_review"
    approve(review, ops)
    with pytest.raises(PacketInvalid):  # operator_review is not a posture that is filed
        file(review, ops)
    incomplete = services.packet_edit(
        packet=review, actor=ops.preparer, changes={"posture": "needs_more_evidence"}
    )
    with pytest.raises(PacketIncomplete):
        services.packet_approve(
            packet=incomplete, actor=ops.approver, confirmed_digest=incomplete.digest
        )
    invalid = services.packet_edit(
        packet=incomplete, actor=ops.preparer, changes={"citations": ["doc:invented"]}
    )
    assert invalid.status == "invalid"
    with pytest.raises(PacketInvalid):
        services.packet_approve(packet=invalid, actor=ops.approver, confirmed_digest=invalid.digest)
    assert submissions(stripe_at_sandbox, world_dispute.provider_dispute_id) == 0


class KeyedDrafter:
    """A drafter whose packet carries a nested idempotency key of its own."""

    name = "keyed"

    def draft(self, material: Any) -> dict[str, Any]:
        from disputes.drafting import RuleDrafter

        draft = RuleDrafter().draft(material)
        return {
            "posture": draft.posture,
            "summary": draft.summary,
            "citations": draft.citations,
            "open_questions": draft.open_questions,
            "filing_options": {"idempotency_key": "drafter-chosen-key"},
        }


def test_a_conflicting_nested_key_is_refused(
    world: World, ops: Ops, settings: Any, stripe_at_sandbox: SandboxControl
) -> None:
    settings.DISPUTES_DRAFTER = f"{__name__}.KeyedDrafter"
    packet = approve(contest_ready(world, ops), ops)
    with pytest.raises(FilingKeyConflict):
        file(packet, ops, "the-filers-key")
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 0
    assert file(packet, ops, "drafter-chosen-key").provider_status == "answered"


def test_credentials_never_appear_in_packets_receipts_logs_or_responses(
    world: World, ops: Ops, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from receipts.models import Receipt
    from tests.drivers.api import Api

    caplog.set_level(logging.DEBUG)
    packet = approve(contest_ready(world, ops), ops)
    file(packet, ops)
    settle_runs()
    staff = Api(ops.approver)
    responses = [
        staff.get("/api/v1/disputes").content,
        staff.get(f"/api/v1/disputes/{packet.dispute.public_id}").content,
    ]
    secrets = [settings.STRIPE_API_KEY, *settings.STRIPE_WEBHOOK_SECRETS]
    assert all(len(s) >= 8 for s in secrets)
    stored = [
        json.dumps([p.__dict__ for p in Packet.objects.all()], default=str),
        json.dumps([r.__dict__ for r in Receipt.objects.all()], default=str),
        caplog.text,
        *(r.decode() for r in responses),
    ]
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    for secret in secrets:
        for text in stored:
            assert secret not in text


def test_a_filing_interrupted_after_the_provider_call_resumes_with_its_key(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """As if the process died between the provider's answer and the record: the scheduled job
    repeats the call with the same key, the provider replays, nothing is submitted twice."""
    from disputes.packets import filing_request
    from disputes.services import filings_resume
    from disputes.services.filing import _reserve_filing
    from providers import provider_from_settings

    packet = approve(contest_ready(world, ops), ops)
    key = services.filing_key_proposal(packet)
    reserved = _reserve_filing(
        packet=packet, actor=ops.filer, confirmed_digest=packet.digest, key=key
    )
    request = filing_request(reserved, digest=reserved.approved_digest)
    first = provider_from_settings().dispute_file(
        dispute_id=request["dispute_id"],
        evidence=request["evidence"],
        metadata=request["metadata"],
        idempotency_key=key,
    )
    assert first.accepted
    assert Packet.objects.get(pk=packet.pk).filing_status == "submitting"
    assert filings_resume(older_than_s=3600) == 0  # not stranded yet
    assert filings_resume(older_than_s=0) == 1
    resumed = Packet.objects.get(pk=packet.pk)
    assert (resumed.filing_status, resumed.provider_status) == ("awaiting_readback", "answered")
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 1
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"


def test_a_packet_whose_readback_is_verified_says_filed_everywhere(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Issue 10 item 11: once the readback run is VERIFIED the packet's status is `filed` — in the
    model, the API's `packet.status`, the review page's header and both versions tables — not
    `ready_for_review`."""
    from django.test import Client
    from django.urls import reverse

    from tests.drivers.api import Api

    packet = approve(contest_ready(world, ops), ops)
    file(packet, ops)
    settle_runs()
    filed = Packet.objects.get(pk=packet.pk)
    assert filed.filing_status == "filed"
    assert filed.status == "filed"

    api = Api(ops.approver).get(f"/api/v1/disputes/{packet.dispute.public_id}").json()["data"]
    assert (api["packet"]["status"], api["packet"]["filing"]["status"]) == ("filed", "filed")

    client = Client()
    client.force_login(ops.approver)
    review = client.get(reverse("admin:disputes_packet_review", args=[packet.pk])).content.decode()
    header = review.split('id="packet-status">', 1)[1].split("<", 1)[0]
    assert header.startswith("Filed"), header
    versions = review.split('id="packet-versions"', 1)[1]
    row = versions.split(packet.public_id, 1)[1].split("</tr>", 1)[0]
    assert "Filed" in row, row
    assert "Ready for review" not in row
    page = client.get(reverse("admin:disputes_dispute_change", args=[packet.dispute.pk]))
    dispute_row = page.content.decode().split(packet.public_id, 1)[1].split("</tr>", 1)[0]
    assert "Filed" in dispute_row, dispute_row
    assert "Ready for review" not in dispute_row


def test_an_edit_citing_evidence_outside_the_version_brings_it_into_the_version(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Issue 10 item 9: evidence admitted after a version was prepared, then cited by an edit of
    that version, joins it: the version's evidence refs hold it, the digest covers its SHA-256,
    filing sends it, and whoever admitted it is a contributor who cannot approve."""
    from disputes.packets import filing_request, packet_content
    from tests.drivers.disputes import evidence, staff_user

    packet = approve(contest_ready(world, ops), ops)  # approved: no new version on admission
    late = evidence("doc:2", "communication", "Emails with the customer about the parcel")
    services.evidence_admit(dispute=packet.dispute, actor=ops.approver, data=late)
    assert current(packet.dispute).pk == packet.pk

    edited = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"citations": [*packet.citations, "doc:2"]}
    )
    assert edited.validation == {"ok": True, "errors": []}
    assert [e["ref"] for e in edited.evidence_refs] == ["doc:1", "doc:2"]
    assert late["sha256"] in json.dumps(packet_content(edited))
    assert edited.digest == services.packet_digest(edited)
    sent = filing_request(edited, digest=edited.digest)["evidence"]["uncategorized_text"]
    assert f"doc:2 (communication, sha256 {late['sha256']})" in sent
    assert set(edited.contributors.all()) == {ops.preparer, ops.approver}
    with pytest.raises(ApproverIsContributor):
        services.packet_approve(packet=edited, actor=ops.approver, confirmed_digest=edited.digest)
    other = staff_user("oli", "approve_packet")
    approved = services.packet_approve(packet=edited, actor=other, confirmed_digest=edited.digest)
    assert approved.approved_digest == edited.digest


def _past_the_stale_read_window() -> Any:
    import time_machine
    from django.utils import timezone

    return time_machine.travel(timezone.now() + timedelta(minutes=1), tick=True)


def _file_and_lose_the_call(packet: Packet, ops: Ops, sandbox: SandboxControl) -> Packet:
    """File while the provider answers 5xx to every try: the outcome is unknown, nothing is
    submitted, the readback decides."""
    dispute_id = packet.dispute.provider_dispute_id
    sandbox.add_fault(f"/v1/disputes/{dispute_id}", "server_error", method="POST")
    sent = file(packet, ops)
    sandbox.clear_faults()
    assert (sent.provider_status, sent.filing_status) == ("unknown", "awaiting_readback")
    assert submissions(sandbox, dispute_id) == 0
    return sent


def test_a_readback_showing_nothing_submitted_frees_the_dispute_for_a_new_version(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Issue 10 item 12: a filing whose readback ends without proof, and shows nothing submitted,
    does not lock the dispute: the version is `not_submitted` (refused with a code saying so), a
    new version can be prepared, approved and filed, and it is filed."""
    packet = approve(contest_ready(world, ops), ops)
    sent = _file_and_lose_the_call(packet, ops, stripe_at_sandbox)
    with _past_the_stale_read_window():
        verdicts = settle_runs(max_rounds=45)
    assert sent.filing_run is not None
    assert verdicts[sent.filing_run.pk] not in ("PENDING", "VERIFIED")
    failed = Packet.objects.get(pk=packet.pk)
    assert failed.filing_status == "not_submitted"
    with pytest.raises(PacketNotSubmitted) as refused:
        file(failed, ops, "another-key")
    assert "nothing submitted" in refused.value.message
    assert f"Version {failed.version}" in refused.value.message

    fresh = services.packet_prepare(dispute=packet.dispute, requested_by=None)
    assert fresh.version == failed.version + 1
    assert Packet.objects.get(pk=packet.pk).status == "superseded"
    sent_again = file(approve(fresh, ops), ops)
    assert sent_again.provider_status == "answered"
    settle_runs()
    assert Packet.objects.get(pk=fresh.pk).filing_status == "filed"
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 1


def test_a_readback_showing_another_submission_locks_the_dispute_and_says_so(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Issue 10 item 12, the other side: when the readback shows evidence submitted that is not
    the approved packet, the dispute stays locked, and every refusal says what is true (the
    version, the verdict, the submission the provider shows) with its own code."""
    packet = approve(contest_ready(world, ops), ops)
    sent = _file_and_lose_the_call(packet, ops, stripe_at_sandbox)
    dispute_id = packet.dispute.provider_dispute_id
    client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": stripe_at_sandbox.url}
    )
    client.v1.disputes.update(  # someone else submits other evidence at the provider
        dispute_id,
        params={"evidence": {"uncategorized_text": "x"}, "metadata": {"vouch_packet_digest": "z"}},
    )
    with _past_the_stale_read_window():
        verdicts = settle_runs(max_rounds=45)
    assert sent.filing_run is not None
    assert verdicts[sent.filing_run.pk] == "CONTRADICTED"
    failed = Packet.objects.get(pk=packet.pk)
    assert failed.filing_status == "readback_failed"
    with pytest.raises(PacketReadbackFailed) as refused:
        services.packet_prepare(dispute=packet.dispute, requested_by=ops.preparer)
    message = refused.value.message
    assert f"Version {failed.version}" in message
    assert "CONTRADICTED" in message
    assert "submitted" in message
    assert refused.value.code == "packet_readback_failed"
    with pytest.raises(PacketReadbackFailed):
        file(failed, ops, "another-key")
    assert Packet.objects.filter(dispute=packet.dispute).count() == failed.version


def test_a_filing_resumed_after_its_key_expired_is_read_back_not_sent_again(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """The process died after the provider filed; the job comes back only after the provider has
    forgotten the key (24 h). Sending again would not be replayed: Stripe refuses a second
    submission, and that refusal must not be taken for "nothing was filed". Past the key's life
    the job does not call `dispute.file` again; the readback decides."""
    import time_machine
    from django.utils import timezone

    from disputes.packets import filing_request
    from disputes.services import filings_resume
    from disputes.services.filing import _reserve_filing
    from providers import provider_from_settings

    packet = approve(contest_ready(world, ops), ops)
    key = services.filing_key_proposal(packet)
    reserved = _reserve_filing(
        packet=packet, actor=ops.filer, confirmed_digest=packet.digest, key=key
    )
    request = filing_request(reserved, digest=reserved.approved_digest)
    assert (
        provider_from_settings()
        .dispute_file(
            dispute_id=request["dispute_id"],
            evidence=request["evidence"],
            metadata=request["metadata"],
            idempotency_key=key,
        )
        .accepted
    )  # ... and the process died before recording it
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        assert filings_resume(older_than_s=60) == 1
        resumed = Packet.objects.get(pk=packet.pk)
        assert resumed.filing_status == "awaiting_readback"  # not refused, not "not filed"
        assert resumed.filing_key == key
        assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 1
        settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
