"""Stripe's dispute shapes at API 2026-10-28.endive, end to end against the sandbox through the
services, the API and the admin: an appeal sent and held under `evidence.appeal.card`, proven by
its readback; a dispute whose `due_by` is 0 (no response allowed) that says so everywhere and to
which nothing is ever sent; a Mastercard compliance dispute filed only with its network fee
acknowledged; an inquiry recorded as Stripe shows it."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
import stripe
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from disputes import exceptions as errors
from disputes import selectors, services
from disputes.models import Dispute, Packet
from disputes.reminders import deadline_reminders_send
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import (
    CLERK,
    Ops,
    World,
    admit_file,
    approve,
    current,
    evidence,
    file,
    pdf,
    staff_user,
)
from tests.helpers import settle_runs
from verification.models import VerificationRun

from .test_appeals_and_fees import event, filed_and_lost

NO_RESPONSE = "No response allowed (the card network allows none)"


def read_dispute(sandbox: SandboxControl, dispute_id: str) -> Any:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def words(html: str) -> str:
    """A page's text as a reader sees it: tags dropped, white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" ;", ";")


def review_page(user: Any, packet: Packet) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("admin:disputes_packet_review", args=[packet.pk]))
    assert response.status_code == 200
    return unescape(response.content.decode())


def fund(world: World, pm: str) -> str:
    """`World.fund` with another test card."""
    data = world.buyer.create(10_000_000, pm=pm)
    world.envelope_id = data["envelope_id"]
    world.charge_id = data["funding_legs"][0]["charge"]
    settle_runs()
    return world.charge_id


def test_an_appeal_is_held_at_stripe_under_card_and_its_readback_verifies(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl, media: Any
) -> None:
    response = filed_and_lost(world, ops, stripe_at_sandbox)
    dispute = Dispute.objects.get(pk=response.dispute_id)
    admit_file(dispute, ops.preparer, "doc:courier", "delivery", pdf("Courier photo"))
    appeal = approve(services.appeal_prepare(dispute=dispute, requested_by=ops.preparer), ops)
    stripe_at_sandbox.appeal_dispute(dispute.provider_dispute_id)

    sent = file(Packet.objects.get(pk=appeal.pk), ops)
    assert sent.provider_status == "answered", sent.filing_error
    assert sent.filing_run is not None
    verdicts = settle_runs()
    assert verdicts[sent.filing_run.pk] == "VERIFIED"
    filed = Packet.objects.get(pk=appeal.pk)
    assert (filed.status, filed.filing_status) == ("filed", "filed")
    held = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)["evidence"]["appeal"]
    assert set(held.to_dict()) == {"card"}
    assert appeal.summary in held["card"]["reason_for_filing"]
    assert held["card"]["supporting_files"] == list(filed.filing_files.values())


def test_a_dispute_that_allows_no_response_says_so_and_takes_no_response(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    # The bank allows no response: Stripe shows `evidence_details.due_by: 0`.
    opened = stripe_at_sandbox.open_dispute(
        world.charge_id, reason="general", response_allowed=False
    )
    assert read_dispute(stripe_at_sandbox, opened["id"])["evidence_details"]["due_by"] == 0
    event(opened["id"])
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    assert dispute.response_deadline is None  # not 1970-01-01
    assert dispute.response_allowed is False
    # Nothing to prepare, nothing to tell Stripe (no submission can be made).
    assert not dispute.packets.exists()
    with pytest.raises(errors.DisputeResponseNotAllowed) as refused:
        services.packet_prepare(dispute=dispute, requested_by=ops.preparer)
    assert refused.value.code == "dispute_response_not_allowed"
    assert not dispute.packets.exists()

    # The API says so, and refuses to prepare a response.
    clerk = Api(staff_user("clerk", *CLERK))
    shown = clerk.get(f"/api/v1/disputes/{dispute.public_id}").json()["data"]
    assert (shown["response_deadline"], shown["response_allowed"]) == (None, False)
    assert shown["response_deadline_note"] == NO_RESPONSE
    answer = clerk.post(f"/api/v1/disputes/{dispute.public_id}/packet", {})
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "dispute_response_not_allowed"

    # The admin says so.
    admin = Client()
    admin.force_login(staff_user("viewer", "view_dispute"))
    page = admin.get(reverse("admin:disputes_dispute_change", args=[dispute.pk]))
    assert page.status_code == 200
    assert NO_RESPONSE in unescape(page.content.decode())

    # No reminder, whenever the job runs.
    for days in (0, 5, 6, 7, 8):
        with time_machine.travel(timezone.now() + timedelta(days=days), tick=False):
            assert [r.dispute_id for r in deadline_reminders_send()] == []
    after = read_dispute(stripe_at_sandbox, opened["id"])
    assert after["evidence_details"]["submission_count"] == 0


def test_a_ready_packet_is_neither_approved_nor_filed_once_stripe_shows_no_response_allowed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Staff entered the dispute before Stripe's event came, and a packet was prepared, admitted
    to and approved; Stripe's read then says the bank allows no response (`due_by: 0`)."""
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="product_not_received")
    dispute_id = opened["id"]
    services.dispute_enter(
        actor=staff_user("clerk", *CLERK),
        data={
            "dispute_id": dispute_id,
            "charge_id": world.charge_id,
            "amount_micro": 10_000_000,
            "reason": "product_not_received",
        },
    )
    dispute = Dispute.objects.get(provider_dispute_id=dispute_id)
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("doc:1", "delivery"))
    packet = current(dispute)
    assert (packet.posture, packet.status) == ("contest", "ready_for_review"), packet.validation
    approved = approve(packet, ops)
    # The bank now allows no response (an entry reads Stripe first, so this is the order it can
    # happen in: Stripe changes what it shows after the entry).
    details = read_dispute(stripe_at_sandbox, dispute_id)["evidence_details"].to_dict()
    stripe_at_sandbox.tamper(dispute_id, evidence_details={**details, "due_by": 0})
    event(dispute_id)
    dispute = Dispute.objects.get(pk=packet.dispute_id)
    assert (dispute.response_allowed, dispute.response_deadline) == (False, None)

    with pytest.raises(errors.DisputeResponseNotAllowed):
        file(Packet.objects.get(pk=approved.pk), ops)
    with pytest.raises(errors.DisputeResponseNotAllowed):
        approve(Packet.objects.get(pk=approved.pk), ops)
    stored = Packet.objects.get(pk=packet.pk)
    assert (stored.filing_status, stored.provider_status) == ("not_filed", "not_called")
    assert not VerificationRun.objects.filter(contract_id__startswith="stripe.dispute").exists()
    at_provider = read_dispute(stripe_at_sandbox, dispute_id)
    assert at_provider["evidence_details"]["submission_count"] == 0
    assert at_provider["evidence"]["uncategorized_text"] is None

    # The review page says so and offers neither act.
    html = review_page(ops.filer, packet)
    assert NO_RESPONSE in html
    assert 'id="act-file"' not in html
    assert 'id="act-approve"' not in review_page(ops.approver, packet)


def test_a_mastercard_compliance_dispute_is_filed_only_with_its_fee_acknowledged(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    fund(world, "pm_card_mastercard")
    dispute = world.dispute(reason="noncompliant")
    assert (dispute.card_brand, dispute.case_type) == ("mastercard", "compliance")
    assert dispute.enhanced_eligibility_types == ["mastercard_compliance"]
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("doc:1", "consent"))
    packet = current(dispute)
    assert (packet.posture, packet.status) == ("contest", "ready_for_review"), packet.validation
    assert packet.costs["mastercard_compliance_fee_micro"] == 500_000_000
    assert packet.costs["visa_compliance_fee_micro"] == 0
    assert packet.enhanced == {
        "mastercard_compliance": {"fee_acknowledgement": "required from the approver"}
    }
    # The review page asks the approver for Mastercard's fee, apart from the approval itself.
    page = words(review_page(ops.approver, packet))
    assert "Mastercard compliance fee $500.00" in page
    assert (
        "I acknowledge the card network's fee of $500.00 (USD) for contesting this Mastercard "
        "compliance dispute" in page
    )
    assert "enhanced_evidence.mastercard_compliance.fee_acknowledged" in page
    # And the API shows the fee.
    shown = (
        Api(staff_user("clerk", *CLERK)).get(f"/api/v1/disputes/{dispute.public_id}").json()["data"]
    )
    assert shown["case_type"] == "compliance"
    assert shown["packet"]["costs"]["mastercard_compliance_fee_micro"] == 500_000_000
    assert shown["packet"]["costs"]["mastercard_compliance_fee_usd"] == 500.0

    with pytest.raises(errors.FeeNotAcknowledged):
        approve(packet, ops)
    approved = approve(packet, ops, fee_acknowledged=True)
    assert approved.fee_acknowledged is True
    sent = file(approved, ops)
    assert sent.provider_status == "answered", sent.filing_error
    settle_runs()
    assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    at_provider = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)
    enhanced = at_provider["evidence"]["enhanced_evidence"]
    assert enhanced["mastercard_compliance"]["fee_acknowledged"] is True
    assert "visa_compliance" not in enhanced
    eligibility = at_provider["evidence_details"]["enhanced_eligibility"]
    assert eligibility["mastercard_compliance"]["status"] == "fee_acknowledged"


def test_an_inquiry_is_recorded_as_stripe_shows_it_and_its_charge_is_refundable(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    chargeback = world.dispute(reason="fraudulent")
    assert (chargeback.case_type, chargeback.is_charge_refundable) == ("chargeback", False)
    chargeback_charge = chargeback.charge_id
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="general", case_type="inquiry")
    event(opened["id"])
    recorded = Dispute.objects.get(provider_dispute_id=opened["id"])
    assert recorded.provider_status == "warning_needs_response"
    assert (recorded.case_type, recorded.is_charge_refundable) == ("inquiry", True)
    charges = [chargeback_charge, world.charge_id]
    assert selectors.charges_stripe_will_not_refund(charge_ids=charges) == {chargeback_charge}
    # An inquiry may still be answered, and its packet's page says what Stripe says of it.
    assert recorded.response_allowed is True
    assert recorded.response_deadline is not None
    page = words(review_page(ops.approver, current(recorded)))
    assert "case type inquiry; the charge may still be refunded" in page
