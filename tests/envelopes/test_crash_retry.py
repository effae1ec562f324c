"""A request that dies right after one of its commits, retried with the same Idempotency-Key,
has exactly one effect (issue 10, items 2 and 4; SPEC §3, §4). Each request runs in a fresh
process that dies (`os._exit`) at a named crash point; the retry comes from the client once the
dead request's lease has lapsed on the shared clock. One test per mutating endpoint, at every
commit it makes."""

from typing import Any

import pytest

from core.models import IdempotencyRecord
from envelopes.models import Debit, Envelope, FundingLeg, JournalEntry, RefundLeg, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.crashes import assert_died, past_the_lease, request_in_a_fresh_process
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

FUNDING: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
DECLINED: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_chargeDeclined"}
# Right after: the rows are created (reserve), the provider's answer is recorded, the whole
# operation returned (before its answer is stored).
FUNDING_POINTS = ["funding_after_reserve", "funding_after_record", "idempotent_before_store"]


def counts(sandbox: SandboxControl) -> dict[str, int]:
    return sandbox.state()["counts"]


@pytest.mark.parametrize("point", FUNDING_POINTS)
def test_a_creation_that_died_after_a_commit_funds_once(
    alice: Api, sandbox: SandboxControl, point: str
) -> None:
    path = "/api/v1/escrow/envelopes"
    died = request_in_a_fresh_process(
        username="alice", path=path, key="create-1", body=FUNDING, crash_at=point
    )
    assert_died(died, point)
    with past_the_lease("create-1"):
        retry = alice.post(path, FUNDING, key="create-1")
    assert retry.status_code == 201, retry.content
    assert retry.json()["data"]["total_funded_micro"] == 2_000_000
    assert Envelope.objects.count() == FundingLeg.objects.count() == 1
    assert counts(sandbox)["payment_intents"] == 1
    again = alice.post(path, FUNDING, key="create-1")
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == retry.json()
    assert ledger_breaches() == []


@pytest.mark.parametrize("point", FUNDING_POINTS)
def test_a_top_up_that_died_after_a_commit_funds_once(
    alice: Api, sandbox: SandboxControl, point: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = f"/api/v1/escrow/envelopes/{envelope_id}/top-ups"
    died = request_in_a_fresh_process(
        username="alice", path=path, key="top-up-1", body=FUNDING, crash_at=point
    )
    assert_died(died, point)
    with past_the_lease("top-up-1"):
        retry = alice.post(path, FUNDING, key="top-up-1")
    assert retry.status_code == 201, retry.content
    assert retry.json()["data"]["total_funded_micro"] == 7_000_000
    assert FundingLeg.objects.count() == 2
    assert counts(sandbox)["payment_intents"] == 2  # the creation's and the top-up's
    assert ledger_breaches() == []


@pytest.mark.parametrize(
    "point",
    [
        "refund_after_reserve",
        "refund_after_provider_call",
        "refund_after_record",
        "idempotent_before_store",
    ],
)
def test_a_refund_that_died_after_a_commit_refunds_once(
    alice: Api, sandbox: SandboxControl, point: str
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)  # two legs: the refund spans both charges
    path = f"/api/v1/escrow/envelopes/{envelope_id}/refund"
    died = request_in_a_fresh_process(
        username="alice", path=path, key="refund-1", body={}, crash_at=point
    )
    assert_died(died, point)
    with past_the_lease("refund-1"):
        retry = alice.post(path, {}, key="refund-1")
    assert retry.status_code == 200, retry.content
    data = retry.json()["data"]
    assert data["status"] == "refunded"
    assert data["refunded_micro"] == 13_000_000
    assert RefundOperation.objects.count() == 1
    assert RefundLeg.objects.count() == 2
    assert data["refund_id"] == RefundOperation.objects.get().public_id
    assert counts(sandbox)["refunds"] == 2  # one provider refund per leg, never more
    assert ledger_breaches() == []


@pytest.mark.parametrize("point", ["debit_after_commit", "idempotent_before_store"])
def test_a_debit_that_died_after_its_commit_debits_once(
    alice: Api, staff_api: Api, point: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = f"/api/v1/escrow/envelopes/{envelope_id}/debits"
    body = {"amount_micro": 1_000_000, "reference": "job-42"}
    died = request_in_a_fresh_process(
        username=staff_api.user.username, path=path, key="debit-1", body=body, crash_at=point
    )
    assert_died(died, point)
    with past_the_lease("debit-1"):
        retry = staff_api.post(path, body, key="debit-1")
    assert retry.status_code == 201, retry.content
    assert retry.json()["data"]["debit_id"] == Debit.objects.get().public_id
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_debited_micro, envelope.unspent_micro) == (1_000_000, 4_000_000)
    assert JournalEntry.objects.filter(kind="debit").count() == 1
    assert ledger_breaches() == []


def test_a_declined_creation_that_died_replays_the_decline(
    alice: Api, sandbox: SandboxControl
) -> None:
    """Item 4: the decline was recorded (the envelope is gone) and the process died before the
    answer was stored: the retry replays 402 card_declined, never a 500 nor a new payment."""
    path = "/api/v1/escrow/envelopes"
    died = request_in_a_fresh_process(
        username="alice",
        path=path,
        key="declined-1",
        body=DECLINED,
        crash_at="funding_after_record",
    )
    assert_died(died, "funding_after_record")
    assert not Envelope.objects.exists()
    record = IdempotencyRecord.objects.get(key="declined-1")
    assert not record.running  # the decline was kept in the transaction that recorded it
    retry = alice.post(path, DECLINED, key="declined-1")
    assert retry.status_code == 402, retry.content
    assert retry.json()["error"]["code"] == "card_declined"
    assert retry.headers.get("Idempotent-Replayed") == "true"
    assert counts(sandbox)["payment_intents"] == 1
    assert not Envelope.objects.exists()


def test_a_declined_top_up_that_died_replays_the_decline(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = f"/api/v1/escrow/envelopes/{envelope_id}/top-ups"
    died = request_in_a_fresh_process(
        username="alice",
        path=path,
        key="declined-2",
        body=DECLINED,
        crash_at="funding_after_record",
    )
    assert_died(died, "funding_after_record")
    retry = alice.post(path, DECLINED, key="declined-2")
    assert retry.status_code == 402, retry.content
    assert retry.json()["error"]["code"] == "card_declined"
    assert counts(sandbox)["payment_intents"] == 2
    assert FundingLeg.objects.count() == 1
    assert Envelope.objects.get(public_id=envelope_id).total_funded_micro == 5_000_000
