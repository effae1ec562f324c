"""Packets catch up (issue 10 item 10): when a receipt for a dispute's charge is written, or
evidence is admitted, a dispute whose current packet is neither approved nor filed (nor being
filed) gets a new version prepared on its own; for a receipt nobody contributes to it, for
evidence its admitter does."""

from __future__ import annotations

from typing import Any

import pytest

from disputes import services
from disputes.models import Packet
from receipts.models import Receipt
from tests.drivers.disputes import Ops, World, current, evidence
from tests.helpers import settle_runs


@pytest.mark.django_db(transaction=True)
def test_a_dispute_that_arrives_before_its_charge_receipt_catches_up_when_it_is_written(
    world: World,
) -> None:
    """End to end, committed as in production: the funding's verification run is still pending
    when the dispute arrives, so Vouch cannot prove the charge (`needs_more_evidence`). When the
    run is VERIFIED its transaction writes the charge receipt; after that commit the dispute gets
    a new version by itself, citing the receipt, that nobody contributed to."""
    funded = world.buyer.create(10_000_000)
    world.envelope_id = funded["envelope_id"]
    world.charge_id = funded["funding_legs"][0]["charge"]
    assert not Receipt.objects.filter(charge_id=world.charge_id).exists()
    dispute = world.dispute(reason="fraudulent")
    first = current(dispute)
    assert (first.version, first.posture, first.status) == (1, "needs_more_evidence", "incomplete")

    settle_runs()  # the charge's run is VERIFIED: its receipt is written
    receipt = Receipt.objects.get(kind="charge", charge_id=world.charge_id)
    caught_up = current(dispute)
    assert caught_up.version == 2
    assert caught_up.posture == "operator_review"  # fraudulent, and no consent evidence yet
    assert receipt.id in caught_up.citations
    assert caught_up.receipt_ids == [receipt.id]
    assert caught_up.requested_by is None
    assert not caught_up.contributors.exists()  # any approver may approve it
    assert Packet.objects.get(pk=first.pk).status == "superseded"
    settle_runs()  # nothing new to write: no further version
    assert dispute.packets.count() == 2


def test_evidence_admitted_prepares_a_new_version_its_admitter_contributes_to(
    world: World, ops: Ops
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    assert current(dispute).posture == "operator_review"
    services.evidence_admit(
        dispute=dispute, actor=ops.preparer, data=evidence("track:1Z9", "delivery")
    )
    packet = current(dispute)
    assert packet.version == 2
    assert packet.posture == "contest"
    assert "track:1Z9" in packet.citations
    assert packet.requested_by is None  # nobody asked for it ...
    assert list(packet.contributors.all()) == [ops.preparer]  # ... but the admitter contributed
    # The same evidence again is the same admission: no new version.
    services.evidence_admit(
        dispute=dispute, actor=ops.preparer, data=evidence("track:1Z9", "delivery")
    )
    assert dispute.packets.count() == 2


def receipt_arrives(world: World, capture: Any) -> None:
    """A receipt for the disputed charge is written, as `receipts` announces it (a refund of a
    disputed charge is refused by the provider, so no new receipt can be made for it here): the
    signal, inside a transaction, and that transaction's commit."""
    from django.db import transaction

    from receipts.signals import receipt_written

    receipt = Receipt.objects.get(kind="charge", charge_id=world.charge_id)
    with capture(execute=True) as callbacks, transaction.atomic():
        receipt_written.send(sender=Receipt, receipt=receipt)
    assert callbacks  # the work waits for the commit


def test_an_approved_or_filed_packet_is_never_replaced_by_itself(
    world: World, ops: Ops, django_capture_on_commit_callbacks: Any
) -> None:
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    services.evidence_admit(dispute=dispute, actor=ops.preparer, data=evidence("t:1", "delivery"))
    packet = current(dispute)
    approved = services.packet_approve(
        packet=packet, actor=ops.approver, confirmed_digest=packet.digest
    )
    services.evidence_admit(dispute=dispute, actor=ops.filer, data=evidence("t:2", "delivery"))
    assert current(dispute).pk == approved.pk  # approved: it stays the current version
    receipt_arrives(world, django_capture_on_commit_callbacks)
    assert current(dispute).pk == approved.pk

    services.packet_file(
        packet=approved,
        actor=ops.filer,
        confirmed_digest=approved.digest,
        idempotency_key=services.filing_key_proposal(approved),
    )
    settle_runs()
    assert Packet.objects.get(pk=approved.pk).filing_status == "filed"
    services.evidence_admit(dispute=dispute, actor=ops.filer, data=evidence("t:3", "delivery"))
    receipt_arrives(world, django_capture_on_commit_callbacks)
    assert current(dispute).pk == approved.pk
    assert dispute.packets.count() == 2  # the event's version and the first evidence's


def test_a_receipt_of_another_charge_changes_no_dispute(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    with django_capture_on_commit_callbacks(execute=True):
        world.fund()  # another envelope, another charge, its receipt
    assert dispute.packets.count() == 1
