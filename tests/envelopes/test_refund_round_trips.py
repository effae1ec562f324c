"""What a refund asks of the database (issue 15): the caller's user with its verified e-mail, the
envelope locked with its funding legs, the reserve's writes, and each leg's record: one round
trip each, the answer's balances read back by the record itself. A regression here costs every
refund its throughput (bench/refund_api.py --against naive); the guarantees are tested elsewhere
(the ledger, the crash points, the racing recorders)."""

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from envelopes.models import Envelope
from tests.drivers.api import Api
from tests.helpers import atomic_blocks_entered

pytestmark = pytest.mark.django_db


def _sent(queries: CaptureQueriesContext) -> list[str]:
    """What went to PostgreSQL, without the savepoints the test's own transaction adds."""
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def _refund(alice: Api, envelope_id: str, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", body)
    assert response.status_code == 200, response.content
    return response.json()["data"], _sent(queries)


def test_a_one_leg_refund_is_four_round_trips_and_its_balances_are_the_rows(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]

    data, sent = _refund(alice, envelope_id, {"amount_micro": 1_000_000})

    assert data["status"] == "refunded"
    assert len(sent) == 4, sent
    user, lock, reserve, record = sent
    assert "account_emailaddress" in user  # the verified flag, in the user's SELECT
    assert "FOR UPDATE" in lock
    assert "envelopes_fundingleg" in lock  # the legs, in the lock's round trip
    assert reserve.count("INSERT INTO") == 3  # the operation, its leg, the journal entry
    assert "verification_verificationrun" in record
    assert "RETURNING" in record.split(";")[0]  # the envelope's UPDATE reads the balances back
    row = Envelope.objects.get(public_id=envelope_id)
    assert data["balances"]["unspent_micro"] == row.unspent_micro == 4_000_000
    assert data["balances"]["total_refunded_micro"] == row.total_refunded_micro == 1_000_000
    assert data["balances"]["reserved_micro"] == row.reserved_micro == 0


def test_a_refund_whose_last_leg_is_refused_reads_its_balances_after_the_release(
    alice: Api, sandbox: Any
) -> None:
    """The last record moved no money by its own UPDATE (the release did): the answer's balances
    are read after it, and show the refused leg's money back."""
    envelope = alice.create(5_000_000)
    envelope_id = envelope["envelope_id"]
    alice.top_up(envelope_id, 2_000_000)
    original = envelope["funding_legs"][0]["charge"]
    sandbox.open_dispute(original, reason="fraudulent")  # the original is refunded last

    data, sent = _refund(alice, envelope_id, {})

    assert [leg["outcome"] for leg in data["legs"]] == ["accepted", "refused"]
    row = Envelope.objects.get(public_id=envelope_id)
    assert data["balances"]["unspent_micro"] == row.unspent_micro == 5_000_000
    assert data["balances"]["total_refunded_micro"] == row.total_refunded_micro == 2_000_000
    assert data["balances"]["reserved_micro"] == row.reserved_micro == 0
    assert any(q.startswith("SELECT") and "envelopes_envelope" in q for q in sent[-1:]), sent


def test_a_keyed_refund_claims_its_key_in_one_statement_and_names_the_refund_in_the_reserve(
    alice: Api,
) -> None:
    """With an Idempotency-Key: the new key's record is one INSERT (no transaction of its own),
    the refund it creates is named in the reserve's round trip, the lease is renewed before the
    provider call and the answer stored after: three round trips more, and a replay sends the
    same answer."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = f"/api/v1/escrow/envelopes/{envelope_id}/refund"

    with CaptureQueriesContext(connection) as queries:
        response = alice.post(path, {"amount_micro": 1_000_000}, key="round-trips")
    assert response.status_code == 200, response.content
    sent = _sent(queries)

    assert len(sent) == 7, sent
    user, claim, lock, reserve, renew, record, store = sent
    assert "account_emailaddress" in user
    assert "ON CONFLICT DO NOTHING" in claim
    assert "FOR UPDATE" in lock
    assert "core_idempotencyrecord" in reserve  # the record names the refund with its creation
    assert "lease_until" in renew
    assert "verification_verificationrun" in record
    assert "response_body" in store
    replay = alice.post(path, {"amount_micro": 1_000_000}, key="round-trips")
    assert replay.json() == response.json()
    assert replay["Idempotent-Replayed"] == "true"


@pytest.mark.django_db(transaction=True)
def test_outside_any_transaction_begin_and_commit_travel_with_the_statements(
    alice: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a request runs in production (autocommit, no test transaction around it): the reserve's
    BEGIN goes with the lock and its COMMIT with the writes, the record is one implicit
    transaction, and no atomic block adds BEGIN/COMMIT round trips of its own: four in all."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    entered = atomic_blocks_entered(monkeypatch)

    data, sent = _refund(alice, envelope_id, {"amount_micro": 1_000_000})

    assert data["status"] == "refunded"
    assert not entered
    assert len(sent) == 4, sent
    _, lock, reserve, record = sent
    assert lock.startswith("BEGIN;")
    assert reserve.endswith("COMMIT")
    assert "BEGIN" not in record
    assert "COMMIT" not in record
    row = Envelope.objects.get(public_id=envelope_id)
    assert data["balances"]["unspent_micro"] == row.unspent_micro == 4_000_000
    assert row.reserved_micro == 0
