"""End to end (acceptance 5): with a Celery worker and beat running and the sandbox delivering
signed webhooks to a live server, a dispute opened through the sandbox's control API on a funded,
partly refunded envelope arrives by webhook and gets a prepared packet, no person touching it."""

from __future__ import annotations

import pytest

from disputes.models import Dispute
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import wait_until


@pytest.mark.django_db(transaction=True)
def test_a_dispute_arriving_by_webhook_gets_a_prepared_packet(
    worker_with_beat: None, alice: Api, sandbox: SandboxControl
) -> None:
    envelope = alice.create(10_000_000)
    charge = envelope["funding_legs"][0]["charge"]
    refund = alice.post(
        f"/api/v1/escrow/envelopes/{envelope['envelope_id']}/refund", {"amount_micro": 3_000_000}
    ).json()["data"]
    assert refund["status"] == "refunded"

    def receipts_written() -> bool:
        return Receipt.objects.filter(charge_id=charge, kind__in=["charge", "refund"]).count() == 2

    wait_until(receipts_written, timeout=60, what="charge and refund receipts")
    opened = sandbox.open_dispute(charge, reason="fraudulent", amount=1000)

    def packet_prepared() -> bool:
        dispute = Dispute.objects.filter(provider_dispute_id=opened["id"]).first()
        return dispute is not None and dispute.packets.exists()

    wait_until(packet_prepared, timeout=60, what="a packet for the webhook's dispute")
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    packet = dispute.packets.get()
    refund_receipt = Receipt.objects.get(charge_id=charge, kind="refund")
    assert dispute.source == "provider"
    assert (dispute.charge_id, dispute.amount_micro, dispute.reason) == (
        charge,
        10_000_000,
        "fraudulent",
    )
    # $3.00 of the $10.00 disputed is refunded and verified: a person must decide the rest.
    assert packet.posture == "operator_review"
    assert refund_receipt.id in packet.citations
    assert packet.status == "ready_for_review"
    assert packet.requested_by is None
    assert not packet.contributors.exists()
    assert (packet.approval_status, packet.filing_status, packet.provider_status) == (
        "not_requested",
        "not_filed",
        "not_called",
    )
