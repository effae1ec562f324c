"""An envelope's detail (`envelope_data`, the API's GET and MCP's envelope_get) is read in one round
trip of plain SQL (issue 39 item 11: five ORM queries were half of a read's CPU), and says exactly
what the ORM's rows say: funding legs by sequence, debits oldest first, refunds newest first with
each one's status from its own legs, disputes' funds oldest first."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from envelopes.models import Envelope
from envelopes.selectors import data as selectors
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000


def _as_the_orm_reads_it(envelope: Envelope) -> dict[str, Any]:
    """The detail as the ORM gives it, row by row (what envelope_data answered before)."""
    return {
        "funding_legs": [
            selectors._funding(leg) for leg in envelope.funding_legs.order_by("sequence")
        ],
        "debits": [selectors._debit(d) for d in envelope.debits.order_by("created_at", "id")],
        "refunds": [
            {
                "refund_id": op.public_id,
                "status": selectors.refund_status(list(op.legs.all())),
                "requested_micro": op.requested_micro,
            }
            for op in envelope.refunds.order_by("-created_at", "-id")
        ],
        "disputes": [
            selectors._dispute_funds(f) for f in envelope.dispute_funds.order_by("created_at", "id")
        ],
    }


def test_the_detail_is_one_round_trip_and_the_orms_rows(
    alice: Api, staff_api: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(4 * DOLLAR)["envelope_id"]
    alice.top_up(envelope_id, 3 * DOLLAR)
    alice.top_up(envelope_id, 2 * DOLLAR)
    debit = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": DOLLAR, "reference": "claim-1"},
        key="d1",
    )
    assert debit.status_code == 201, debit.content
    # One refund whose first leg Stripe refuses (partially refunded), then one that succeeds.
    stripe_at_sandbox.add_fault(
        "/v1/refunds", "refuse", method="POST", times=1, error_code="charge_disputed"
    )
    for amount in (3 * DOLLAR, DOLLAR):
        refunded = alice.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": amount}
        )
        assert refunded.status_code in (200, 202), refunded.content
    settle_runs()
    envelope = Envelope.objects.get(public_id=envelope_id)
    expected = _as_the_orm_reads_it(envelope)
    assert len(expected["funding_legs"]) == 3
    assert len(expected["debits"]) == 1
    assert [r["status"] for r in expected["refunds"]] == ["refunded", "partially_refunded"]

    with CaptureQueriesContext(connection) as queries:
        shown = selectors.envelope_data(envelope)
    assert len(queries) == 1, [q["sql"][:120] for q in queries]
    for part, rows in expected.items():
        assert shown[part] == selectors.with_usd({part: rows})[part], part
    assert alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"] == shown


def test_an_envelope_with_nothing_but_its_funding_reads_empty_lists(alice: Api) -> None:
    envelope_id = alice.create(2 * DOLLAR)["envelope_id"]
    shown = selectors.envelope_data(Envelope.objects.get(public_id=envelope_id))
    assert [leg["kind"] for leg in shown["funding_legs"]] == ["original"]
    assert (shown["debits"], shown["refunds"], shown["disputes"]) == ([], [], [])
