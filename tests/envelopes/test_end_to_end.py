"""End to end with a Celery worker and beat (a separate process): every leg of a refund reaches
VERIFIED, visible on GET /api/v1/escrow/refunds/{refund_id} (acceptance 6)."""

import time

import pytest

from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api


@pytest.mark.django_db(transaction=True)
def test_every_leg_of_a_refund_reaches_verified(
    worker_with_beat: None, alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    alice.top_up(envelope_id, 2_000_000)
    refund = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {}).json()["data"]
    assert refund["status"] == "refunded"
    assert refund["verification_status"] == "pending"
    deadline = time.monotonic() + 60
    while True:
        shown = alice.get(f"/api/v1/escrow/refunds/{refund['refund_id']}").json()["data"]
        if shown["verification_status"] != "pending":
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)
    assert shown["verification_status"] == "verified"
    assert [leg["verification_verdict"] for leg in shown["legs"]] == ["VERIFIED"] * 3
    assert [leg["amount_micro"] for leg in shown["legs"]] == [2_000_000, 3_000_000, 10_000_000]
