"""Pre-flight limits (issue 13 acceptance 4, first half): a packet whose filing request is over
Stripe's limits on dispute evidence — all text together, one text field, the files together, a
file field for every file — is refused with `packet_over_limit` before approval, and the review
page shows the budget. And a packet whose posture is not filed shows no filing request at all."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from core.models import AuditEvent
from disputes import services
from disputes.exceptions import PacketOverLimit
from disputes.models import Packet
from disputes.packets import packet_budget
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, admit_file, contest_ready, current, pdf

from .test_admin import approve_via_page, messages_of, page, section
from .test_filing import approve, submissions

pytestmark = pytest.mark.usefixtures("media")


def long_delivery_packet(world: World, ops: Ops, items: int) -> Packet:
    """A contest citing `items` delivery items of 500-character summaries each."""
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    for n in range(items):
        ref = f"pod:{n}"
        summary = f"Delivery note {n}: " + "the parcel was handed over and signed for. " * 12
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data={
                "ref": ref,
                "kind": "delivery",
                "summary": summary[:500],
                "sha256": hashlib.sha256(ref.encode()).hexdigest(),
            },
        )
    packet = current(dispute)
    assert (packet.posture, packet.status) == ("contest", "ready_for_review"), packet.validation
    return packet


def test_a_response_text_over_20000_characters_is_refused_before_approval(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = long_delivery_packet(world, ops, 40)
    budget = packet_budget(packet)
    assert budget is not None
    assert not budget.ok
    assert [p["limit"] for p in budget.problems] == ["text_field"]
    assert budget.problems[0]["field"] == "uncategorized_text"
    with pytest.raises(PacketOverLimit) as refused:
        approve(packet, ops)
    assert refused.value.code == "packet_over_limit"
    assert refused.value.status_code == 409
    again = Packet.objects.get(pk=packet.pk)
    assert again.approval_status == "not_requested"
    assert not AuditEvent.objects.filter(action="packet.approve").exists()
    assert submissions(stripe_at_sandbox, packet.dispute.provider_dispute_id) == 0


def test_within_the_limits_the_same_kind_of_packet_is_approved(world: World, ops: Ops) -> None:
    packet = long_delivery_packet(world, ops, 3)
    budget = packet_budget(packet)
    assert budget is not None
    assert budget.ok
    assert budget.text_chars < 20_000
    assert approve(packet, ops).approval_status == "approved"


def test_files_over_the_files_limit_together_are_refused(
    world: World, ops: Ops, settings: Any
) -> None:
    settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES = 3000
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("pod", size=2000))
    admit_file(dispute, ops.preparer, "sig:1", "consent", pdf("sig", size=2000))
    packet = current(dispute)
    assert set(packet.citations) >= {"pod:1"}
    packet = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"citations": ["pod:1", "sig:1"]}
    )
    budget = packet_budget(packet)
    assert budget is not None
    assert (budget.file_bytes, budget.files_max) == (4000, 3000)
    assert [p["limit"] for p in budget.problems] == ["files"]
    with pytest.raises(PacketOverLimit):
        approve(packet, ops)
    # Citing one file only brings it within the limit.
    within = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"citations": ["pod:1"]}
    )
    assert approve(within, ops).approval_status == "approved"


def test_a_file_without_a_free_file_field_is_over_the_limits(world: World, ops: Ops) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    for n in range(3):  # shipping_documentation, uncategorized_file, then nothing is left
        admit_file(dispute, ops.preparer, f"pod:{n}", "delivery", pdf(f"pod {n}"))
    packet = services.packet_edit(
        packet=current(dispute),
        actor=ops.preparer,
        changes={"citations": ["pod:0", "pod:1", "pod:2"]},
    )
    budget = packet_budget(packet)
    assert budget is not None
    assert budget.unplaced == ["pod:2"]
    assert [p["limit"] for p in budget.problems] == ["file_slots"]
    with pytest.raises(PacketOverLimit):
        approve(packet, ops)


def test_the_review_page_shows_the_budget_and_the_refusal(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    packet = long_delivery_packet(world, ops, 40)
    client = Client()
    client.force_login(ops.approver)
    budget = section(page(client, packet), "packet-budget")
    assert "Over Stripe's limits" in budget  # issue 41: words, the code only as details
    assert "uncategorized_text is" in budget
    assert "150,000 characters" in budget  # the total's limit, with the share used
    response = approve_via_page(client, packet)
    assert any(
        m.startswith("Not approved: ") and m.endswith("(details: packet_over_limit)")
        for m in messages_of(response)
    )
    assert Packet.objects.get(pk=packet.pk).approval_status == "not_requested"

    within = contest_ready(world, ops)
    shown = section(page(client, within), "packet-budget")
    assert "within limits" in shown
    assert "Over Stripe's limits" not in shown


# --- a posture that is not filed has no filing request ---------------------------------------


def test_a_packet_that_is_not_filed_shows_no_filing_request(world: World, ops: Ops) -> None:
    packet = contest_ready(world, ops)
    client = Client()
    client.force_login(ops.approver)
    assert '"submit": true' in section(page(client, packet), "packet-handoff")  # a contest has one

    review = services.packet_edit(
        packet=packet, actor=ops.preparer, changes={"posture": "operator_review"}
    )
    assert review.status == "ready_for_review"
    assert review.handoff["request"] is None
    assert review.handoff["operation"] is None
    assert (
        "Vouch files only “Contest the dispute” and “Refund already sent”"
        in (review.handoff["not_filed"])
    )
    html = page(client, review)
    handoff = section(html, "packet-handoff")
    assert 'id="handoff-none"' in handoff
    assert "No filing request" in handoff
    assert '"submit"' not in handoff
    assert "vouch_packet_digest" not in html
    assert "Nothing to budget" in section(html, "packet-budget")
    api = client.get(reverse("api:dispute", args=[review.dispute.public_id])).json()["data"]
    assert api["packet"]["handoff"]["request"] is None
