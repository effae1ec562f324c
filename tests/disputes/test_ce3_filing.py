"""Visa CE 3.0 end to end against the sandbox (SPEC §17): a buyer funds twice, 200 days pass on the
shared clock (the sandbox's and Vouch's), the buyer funds again and disputes that charge as fraud
(Visa 10.4). The response packet shows the qualification with the two earlier charges' receipts,
the digest binds them, filing sends Stripe's `visa_compelling_evidence_3`, and the readback
(`stripe.dispute.filed_ce3`) is VERIFIED only because Stripe reports it qualified."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import stripe
import time_machine
from django.utils import timezone

from disputes import services
from disputes.models import Dispute, Packet
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import Ops, World, approve, current, evidence, file
from tests.helpers import settle_runs

DAYS = 200


def read_dispute(sandbox: SandboxControl, dispute_id: str) -> Any:
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def travel(sandbox: SandboxControl) -> Any:
    """Move the shared clock DAYS on: Vouch's, and the sandbox's (it runs in this process and
    reads the same clock; checked, not assumed)."""
    target = timezone.now() + timedelta(days=DAYS)
    traveller = time_machine.travel(target, tick=True)
    traveller.start()
    assert sandbox.call("GET", "clock")["now"] >= target.timestamp() - 5
    return traveller


def fund_twice_then_dispute_later(world: World, sandbox: SandboxControl) -> tuple[list[str], Any]:
    priors = [world.fund(), world.fund()]
    traveller = travel(sandbox)
    world.fund()
    return priors, traveller


def test_a_fraud_dispute_is_filed_with_ce3_from_the_buyers_earlier_fundings(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    priors, traveller = fund_twice_then_dispute_later(world, stripe_at_sandbox)
    try:
        dispute = world.dispute(reason="fraudulent")
        assert (dispute.network_reason_code, dispute.card_brand) == ("10.4", "visa")
        assert dispute.enhanced_eligibility_types == ["visa_compelling_evidence_3"]
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data=evidence("doc:login", "consent", "The buyer logged in and confirmed the payment"),
        )
        packet = current(dispute)
        assert (packet.posture, packet.status) == ("contest", "ready_for_review")
        ce3 = packet.enhanced["visa_compelling_evidence_3"]
        assert ce3["status"] == "qualified", ce3
        prior_receipts = {
            r.provider_object_id: r.id
            for r in Receipt.objects.filter(provider_object_id__in=priors)
        }
        assert {p["charge"]: p["receipt_id"] for p in ce3["priors"]} == prior_receipts
        assert all(p["age_days"] == DAYS for p in ce3["priors"])
        assert all(
            p["matched"] == ["customer_account_id", "customer_device_id", "customer_purchase_ip"]
            for p in ce3["priors"]
        )
        sent = packet.handoff["request"]["evidence"]["enhanced_evidence"]
        sent_priors = sent["visa_compelling_evidence_3"]["prior_undisputed_transactions"]
        assert sorted(p["charge"] for p in sent_priors) == sorted(priors)
        # The digest binds the priors: another receipt id gives another digest.
        swapped = Packet.objects.select_related("dispute").get(pk=packet.pk)
        swapped.enhanced = {
            "visa_compelling_evidence_3": {**ce3, "priors": list(reversed(ce3["priors"]))}
        }
        assert services.packet_digest(swapped) != packet.digest

        approved = approve(packet, ops)
        filed = file(approved, ops)
        assert filed.filing_run is not None
        assert filed.filing_run.contract_id == "stripe.dispute.filed_ce3"
        verdicts = settle_runs()
        assert verdicts[filed.filing_run.pk] == "VERIFIED"
        assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
        at_provider = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)
        eligibility = at_provider["evidence_details"]["enhanced_eligibility"]
        assert eligibility["visa_compelling_evidence_3"]["status"] == "qualified"
    finally:
        traveller.stop()


def test_without_two_old_enough_fundings_nothing_of_ce3_is_claimed_or_sent(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()  # one prior only, and only 200 days old
    traveller = travel(stripe_at_sandbox)
    try:
        world.fund()
        dispute = world.dispute(reason="fraudulent")
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data=evidence("doc:login", "consent", "The buyer logged in and confirmed the payment"),
        )
        packet = current(dispute)
        ce3 = packet.enhanced["visa_compelling_evidence_3"]
        assert ce3["status"] == "not_qualified"
        assert len(ce3["priors"]) == 1
        assert "enhanced_evidence" not in packet.handoff["request"]["evidence"]
        approved = approve(packet, ops)
        filed = file(approved, ops)
        assert filed.filing_run is not None
        assert filed.filing_run.contract_id == "stripe.dispute.filed"
        settle_runs()
        at_provider = read_dispute(stripe_at_sandbox, dispute.provider_dispute_id)
        assert (
            not at_provider["evidence"]["enhanced_evidence"]
            .to_dict()
            .get("visa_compelling_evidence_3")
        )
        assert Dispute.objects.get(pk=dispute.pk).packets.get(pk=packet.pk).filing_status == (
            "filed"
        )
    finally:
        traveller.stop()


def test_a_readback_that_shows_ce3_not_qualified_never_makes_the_packet_filed(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Stripe judges the qualification: a prior disputed at the provider after Vouch prepared the
    packet makes Stripe say `not_qualified`, and the readback contradicts the packet's claim."""
    priors, traveller = fund_twice_then_dispute_later(world, stripe_at_sandbox)
    try:
        dispute = world.dispute(reason="fraudulent")
        services.evidence_admit(
            dispute=dispute,
            actor=ops.preparer,
            data=evidence("doc:login", "consent", "The buyer logged in and confirmed the payment"),
        )
        packet = current(dispute)
        assert packet.enhanced["visa_compelling_evidence_3"]["status"] == "qualified"
        approved = approve(packet, ops)
        stripe_at_sandbox.open_dispute(priors[0], reason="general")  # outside change
        filed = file(approved, ops)
        assert filed.filing_run is not None
        with time_machine.travel(timezone.now() + timedelta(minutes=5), tick=True):
            verdicts = settle_runs()
        assert verdicts[filed.filing_run.pk] == "CONTRADICTED"
        stored = Packet.objects.get(pk=packet.pk)
        assert stored.filing_status == "readback_failed"
        assert stored.status != "filed"
    finally:
        traveller.stop()


def test_ce3_alone_makes_a_fraud_dispute_a_contest_filed_and_verified(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """No consent evidence admitted: the receipts' CE 3.0 is the fact the contest rests on."""
    priors, traveller = fund_twice_then_dispute_later(world, stripe_at_sandbox)
    try:
        dispute = world.dispute(reason="fraudulent")
        packet = current(dispute)
        assert packet.version == 1  # prepared by the provider's event, nobody asking
        assert (packet.posture, packet.status) == ("contest", "ready_for_review")
        receipts = Receipt.objects.filter(provider_object_id__in=priors).order_by("id")
        assert set(receipts.values_list("id", flat=True)) <= set(packet.citations)
        assert set(receipts.values_list("id", flat=True)) <= set(packet.receipt_ids)
        assert "Visa Compelling Evidence 3.0" in packet.summary
        filed = file(approve(packet, ops), ops)
        assert filed.filing_run is not None
        assert filed.filing_run.contract_id == "stripe.dispute.filed_ce3"
        assert settle_runs()[filed.filing_run.pk] == "VERIFIED"
        assert Packet.objects.get(pk=packet.pk).filing_status == "filed"
    finally:
        traveller.stop()
