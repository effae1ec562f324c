"""Preparing a packet (SPEC §9 steps 1-7), one test per scenario of the issue, on PostgreSQL
against the sandbox with real signed receipts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from disputes import services
from disputes.drafting import DraftMaterial
from disputes.exceptions import EvidenceCredential, ReceiptDetailRefused
from disputes.models import Evidence
from receipts.models import Receipt
from tests.drivers.disputes import Ops, World, current, evidence


def test_unrecognized_charge_without_consent_evidence_needs_an_operator(world: World) -> None:
    world.fund()
    dispute = world.dispute(reason="unrecognized")
    packet = current(dispute)
    charge_receipt = Receipt.objects.get(kind="charge", provider_object_id=world.charge_id)
    assert packet.posture == "operator_review"
    assert packet.status == "ready_for_review"
    assert packet.validation == {"ok": True, "errors": []}
    assert packet.citations == [charge_receipt.id]
    assert any("consent" in q and "Missing evidence" in q for q in packet.open_questions)
    assert (packet.approval_status, packet.filing_status, packet.provider_status) == (
        "not_requested",
        "not_filed",
        "not_called",
    )
    assert packet.requested_by is None
    assert packet.contributors.count() == 0


def test_verified_refund_covering_the_dispute_gives_refund_already_sent(world: World) -> None:
    world.fund(10_000_000)
    world.refund(4_000_000)
    dispute = world.dispute(reason="fraudulent", amount_cents=400)
    packet = current(dispute)
    refund_receipt = Receipt.objects.get(kind="refund", charge_id=world.charge_id)
    assert refund_receipt.amount_micro == 4_000_000
    assert packet.posture == "refund_already_sent", packet.validation
    assert refund_receipt.id in packet.citations
    assert packet.status == "ready_for_review"
    assert packet.handoff["request"]["metadata"] == {"vouch_packet_digest": packet.digest}
    assert refund_receipt.id in packet.handoff["request"]["evidence"]["uncategorized_text"]


def test_partial_prior_refund_gives_operator_review(world: World) -> None:
    world.fund(10_000_000)
    world.refund(3_000_000)
    dispute = world.dispute(reason="fraudulent", amount_cents=700)
    packet = current(dispute)
    refund_receipt = Receipt.objects.get(kind="refund", charge_id=world.charge_id)
    assert packet.posture == "operator_review"
    assert refund_receipt.id in packet.citations
    assert any("$4.00" in q for q in packet.open_questions), packet.open_questions


def test_delivery_evidence_on_product_not_received_gives_contest(world: World, ops: Ops) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    assert current(dispute).posture == "operator_review"  # before the evidence
    services.evidence_admit(
        dispute=dispute, actor=ops.preparer, data=evidence("track:1Z999", "delivery")
    )
    assert current(dispute).posture == "contest"  # caught up by itself (issue 10 item 10)
    packet = services.packet_prepare(dispute=dispute, requested_by=ops.approver)
    assert packet.posture == "contest"
    assert "track:1Z999" in packet.citations
    assert packet.version == 3
    assert set(packet.contributors.all()) == {ops.preparer, ops.approver}  # admitter, requester
    assert dispute.packets.filter(version__lt=3, status="superseded").count() == 2


def test_local_development_receipt_needs_more_evidence(world: World, settings: Any) -> None:
    from receipts import keys

    seed = bytes(range(32))
    settings.RECEIPT_SIGNING_KEY = keys.encode_seed(seed)
    settings.RECEIPT_SIGNING_KEY_ID = "dev-laptop"
    settings.RECEIPT_SIGNING_ENVIRONMENT = "local-development"
    settings.RECEIPT_TRUSTED_KEYS = {
        **settings.RECEIPT_TRUSTED_KEYS,
        "dev-laptop": {"public_key": keys.public_key_of(seed), "environment": "local-development"},
    }
    world.fund()
    receipt = Receipt.objects.get(kind="charge", provider_object_id=world.charge_id)
    assert receipt.key_environment == "local-development"
    packet = current(world.dispute(reason="product_not_received"))
    assert packet.posture == "needs_more_evidence"
    assert packet.status == "incomplete"
    assert any("local_development_key" in q for q in packet.open_questions), packet.open_questions


def test_an_undecided_refund_on_the_charge_needs_more_evidence(world: World) -> None:
    world.fund()
    world.refund(2_000_000, settle=False)  # its verification run is still pending
    packet = current(world.dispute(reason="fraudulent", amount_cents=500))
    assert packet.posture == "needs_more_evidence"
    assert any("not decided" in q for q in packet.open_questions)


@pytest.mark.parametrize(
    "body",
    [
        {"receipts": [{"id": "rcpt_" + "0" * 64, "kind": "refund", "amount_micro": 10_000_000}]},
        {"receipt_ids": ["rcpt_" + "0" * 64]},
    ],
)
def test_caller_supplied_receipt_detail_is_refused(world: World, ops: Ops, body: Any) -> None:
    world.fund()
    dispute = world.dispute()
    with pytest.raises(ReceiptDetailRefused):
        services.evidence_admit(dispute=dispute, actor=ops.preparer, data=body)
    forged = evidence("rcpt_" + "a" * 64, "other")
    with pytest.raises(ReceiptDetailRefused):
        services.evidence_admit(dispute=dispute, actor=ops.preparer, data=forged)
    assert not Evidence.objects.filter(dispute=dispute).exists()
    assert dispute.packets.count() == 1


def test_a_credential_in_evidence_is_refused(world: World, ops: Ops, settings: Any) -> None:
    world.fund()
    dispute = world.dispute()
    leaked = evidence("doc:2", "consent", f"Customer agreed; key {settings.STRIPE_API_KEY}")
    with pytest.raises(EvidenceCredential):
        services.evidence_admit(dispute=dispute, actor=ops.preparer, data=leaked)
    assert not Evidence.objects.filter(dispute=dispute).exists()


class InventingDrafter:
    """A drafter (think: a language model) that cites what was never admitted."""

    name = "inventing"

    def draft(self, material: DraftMaterial) -> Mapping[str, Any]:
        return {
            "posture": "contest",
            "summary": "The customer clearly authorised this charge.",
            "citations": [*material.receipt_ids, "doc:never-admitted", "rcpt_" + "f" * 64],
            "open_questions": [],
        }


class BoastingDrafter:
    """A drafter that claims an effect the packet cannot prove."""

    name = "boasting"

    def draft(self, material: DraftMaterial) -> Mapping[str, Any]:
        return {
            "posture": "operator_review",
            "summary": "The response was filed with Stripe and the dispute is won.",
            "citations": material.receipt_ids,
            "open_questions": [],
        }


@pytest.mark.parametrize(
    ("drafter", "codes"),
    [
        (InventingDrafter, {"citation_not_admitted", "contest_without_evidence"}),
        (BoastingDrafter, {"effect_claim"}),
    ],
)
def test_finalization_rejects_a_drafter_that_invents(
    world: World, settings: Any, drafter: type, codes: set[str]
) -> None:
    world.fund()
    settings.DISPUTES_DRAFTER = f"{__name__}.{drafter.__name__}"
    packet = current(world.dispute(reason="fraudulent"))
    assert packet.drafter == drafter.name
    assert packet.status == "invalid"
    assert packet.validation["ok"] is False
    assert {e["code"] for e in packet.validation["errors"]} == codes
