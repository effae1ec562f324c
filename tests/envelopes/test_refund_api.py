"""The refund of SPEC §3 through the API, against the sandbox."""

from typing import Any

import pytest
import stripe
from django.core.management import call_command

from envelopes.models import Envelope, JournalEntry
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _fund_worked_example(alice: Api, staff_api: Api) -> str:
    envelope = alice.create(10_000_000)  # $10.00
    envelope_id = envelope["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)  # $3.00
    alice.top_up(envelope_id, 2_000_000)  # $2.00
    debit = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 1_234_567, "reference": "clm_1"},
    )
    assert debit.status_code == 201, debit.content
    return envelope_id


def test_the_worked_example(
    alice: Api, staff_api: Api, sdk: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    envelope_id = _fund_worked_example(alice, staff_api)
    before = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    assert before["unspent_micro"] == 13_765_433
    charges = {leg["sequence"]: leg["charge"] for leg in before["funding_legs"]}

    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    assert data["status"] == "refunded"
    assert [(leg["charge"], leg["amount_micro"], leg["outcome"]) for leg in data["legs"]] == [
        (charges[3], 2_000_000, "accepted"),  # the newest top-up first
        (charges[2], 3_000_000, "accepted"),
        (charges[1], 8_760_000, "accepted"),  # the original last, rounded down to the cent
    ]
    assert [leg["amount_usd"] for leg in data["legs"]] == [2.0, 3.0, 8.76]
    assert (data["requested_micro"], data["refunded_micro"], data["failed_micro"]) == (
        13_765_433,
        13_760_000,
        0,
    )
    assert (data["remainder_micro"], data["remainder_usd"]) == (5_433, 0.005433)
    assert (data["requested_usd"], data["refunded_usd"], data["failed_usd"]) == (
        13.765433,
        13.76,
        0.0,
    )
    assert data["verification_status"] == "pending"
    assert all(leg["verification_verdict"] == "PENDING" for leg in data["legs"])
    assert data["balances"] == {
        "total_funded_micro": 15_000_000,
        "total_funded_usd": 15.0,
        "total_debited_micro": 1_234_567,
        "total_debited_usd": 1.234567,
        "total_refunded_micro": 13_760_000,
        "total_refunded_usd": 13.76,
        "reserved_micro": 0,
        "reserved_usd": 0.0,
        "unspent_micro": 5_433,
        "unspent_usd": 0.005433,
        "held_micro": 0,  # no dispute holds money (SPEC §18)
        "held_usd": 0.0,
        "charged_back_micro": 0,
        "charged_back_usd": 0.0,
    }
    # The sandbox holds exactly those refunds, with our metadata.
    for leg in data["legs"]:
        refunds = sdk.v1.refunds.list(params={"charge": leg["charge"]}).data
        assert [(r.id, r.amount) for r in refunds] == [
            (leg["provider_refund_id"], leg["amount_micro"] // 10_000)
        ]
        assert refunds[0].metadata["vouch_leg"] == leg["leg_id"]
        assert refunds[0].metadata["vouch_refund"] == data["refund_id"]
        assert refunds[0].metadata["vouch_envelope"] == envelope_id
    assert sandbox.state()["counts"]["refunds"] == 3
    # The refund resource shows the same.
    again = alice.get(f"/api/v1/escrow/refunds/{data['refund_id']}").json()["data"]
    assert again["legs"] == data["legs"]
    assert (
        alice.get(f"/api/v1/escrow/envelopes/{envelope_id}/refunds").json()["data"]["results"][0][
            "refund_id"
        ]
        == data["refund_id"]
    )


def test_a_disputed_charge_leg_is_refused_and_its_money_comes_back(
    alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = _fund_worked_example(alice, staff_api)
    legs = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"]
    disputed = next(leg["charge"] for leg in legs if leg["sequence"] == 2)
    sandbox.open_dispute(disputed, reason="fraudulent")
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["status"] == "partially_refunded"
    outcomes = {leg["charge"]: (leg["outcome"], leg["error_code"]) for leg in data["legs"]}
    assert outcomes[disputed] == ("refused", "charge_disputed")
    assert data["failed_micro"] == 3_000_000
    assert data["refunded_micro"] == 10_760_000
    assert data["balances"]["unspent_micro"] == 3_000_000 + 5_433  # failed_micro is back
    assert data["balances"]["reserved_micro"] == 0
    assert JournalEntry.objects.filter(kind="release").count() == 1


def test_partial_amount_and_nothing_left(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_234_567}
    )
    data = first.json()["data"]
    assert [leg["amount_micro"] for leg in data["legs"]] == [1_230_000]
    assert data["remainder_micro"] == 4_567
    assert data["balances"]["unspent_micro"] == 5_000_000 - 1_230_000
    rest = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund")
    assert rest.json()["data"]["balances"]["unspent_micro"] == 0
    nothing = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert (nothing.status_code, nothing.json()["error"]["code"]) == (409, "nothing_to_refund")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"amount_micro": 0}, 400, "invalid_amount"),
        ({"amount_micro": -5}, 400, "invalid_amount"),
        ({"amount_micro": "12"}, 400, "invalid_amount"),
        ({"amount_micro": 1.5}, 400, "invalid_amount"),
        ({"amount_micro": 10**30}, 400, "invalid_amount"),
        ({"amount_micro": 5_000_001}, 422, "amount_exceeds_unspent"),
        ({"amount_micro": 9_999}, 400, "invalid_amount"),  # less than a cent (issue 27)
        ({"amount_micro": 100}, 400, "invalid_amount"),
        ({"colour": "red"}, 400, "validation_error"),
        ([1, 2], 400, "validation_error"),
    ],
)
def test_bad_refund_requests_change_nothing(
    alice: Api, sandbox: SandboxControl, body: Any, status: int, code: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", body)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
    assert sandbox.state()["counts"]["refunds"] == 0


def test_a_refund_of_less_than_a_cent_says_a_refund_is_at_least_one_cent(alice: Api) -> None:
    """Issue 27: 100 micro with 10,000,000 unspent answered 409 `nothing_to_refund` ("no unspent
    money"), which is untrue; the amount is what is wrong."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 100})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_amount"
    assert "at least one cent (10,000 micro-dollars)" in error["message"]
    assert "no unspent money" not in error["message"]
    cent = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 10_000})
    assert cent.status_code == 200, cent.content
    assert cent.json()["data"]["refunded_micro"] == 10_000


def test_check_ledger_is_clean_after_all_that(alice: Api, staff_api: Api, capsys: Any) -> None:
    envelope_id = _fund_worked_example(alice, staff_api)
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 4_000_000})
    call_command("check_ledger")
    assert "Ledger clean: 1 envelope(s) checked." in capsys.readouterr().out
