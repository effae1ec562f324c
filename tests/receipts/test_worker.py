"""With a Celery worker and beat (a separate process) the receipts are written by the worker, and
signed with the same fixed test key, so this process trusts them (SPEC §8)."""

import time

import pytest

from receipts.models import Receipt
from receipts.selectors import receipt_tree
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api


@pytest.mark.django_db(transaction=True)
def test_the_worker_writes_receipts_this_process_trusts(
    worker_with_beat: None, alice: Api, sandbox: SandboxControl
) -> None:
    data = alice.create(5_000_000)
    charge_id = data["funding_legs"][0]["charge"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{data['envelope_id']}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 200, response.content
    deadline = time.monotonic() + 60
    while Receipt.objects.filter(charge_id=charge_id).count() < 2:
        assert time.monotonic() < deadline, list(Receipt.objects.values("kind", "charge_id"))
        time.sleep(0.5)
    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert tree.unreversed_refunded_micro() == 2_000_000
    assert {r.key_id for r in Receipt.objects.all()} == {"test-sandbox-1"}
