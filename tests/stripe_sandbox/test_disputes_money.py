"""Money a dispute moves, and inquiries, through the official SDK: a chargeback withdraws the
disputed amount and Stripe's dispute fee (one balance transaction, listed on the dispute), a won
dispute reinstates the amount, an inquiry withdraws nothing and its charge stays refundable."""

from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

HOW_DISPUTES_WORK = "https://docs.stripe.com/disputes/how-disputes-work"
INQUIRIES = "https://stripe.com/docs/disputes"  # "Inquiries and retrievals"
FEES_FAQ = "https://support.stripe.com/questions/dispute-fees-faq"
DISPUTES_TOPIC = "https://support.stripe.com/topics/disputes"
EVENT_TYPES = "https://docs.stripe.com/api/events/types"
ERROR_CODES = "https://docs.stripe.com/error-codes#charge-disputed"
DISPUTE_FEE = 1500  # USD 15.00, https://stripe.com/pricing


def _events(client: stripe.StripeClient, kind: str) -> list[dict[str, Any]]:
    return [e.to_dict() for e in client.v1.events.list(params={"type": kind}).data]


def _inquiry(client: stripe.StripeClient, sandbox: SandboxControl, amount: int = 5000) -> str:
    charge_id = paid_charge(client, amount, pm="pm_card_amex")
    return str(sandbox.open_dispute(charge_id, reason="general", case_type="inquiry")["id"])


@pytest.mark.stripe_behaviour(
    "A chargeback withdraws the disputed amount plus the dispute fee from the balance, in one "
    "balance transaction the dispute lists, and emits charge.dispute.funds_withdrawn",
    source=HOW_DISPUTES_WORK,
)
def test_a_chargeback_withdraws_the_amount_and_the_dispute_fee(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 5000)
    opened = sandbox.open_dispute(charge_id, reason="fraudulent", amount=3000)
    dispute = client.v1.disputes.retrieve(opened["id"]).to_dict()
    (withdrawal,) = dispute["balance_transactions"]
    assert withdrawal["object"] == "balance_transaction"
    assert (withdrawal["type"], withdrawal["reporting_category"]) == ("adjustment", "dispute")
    assert (withdrawal["amount"], withdrawal["fee"], withdrawal["net"]) == (
        -3000,
        DISPUTE_FEE,
        -3000 - DISPUTE_FEE,
    )
    assert withdrawal["source"] == dispute["id"]
    assert [(f["amount"], f["type"], f["description"]) for f in withdrawal["fee_details"]] == [
        (DISPUTE_FEE, "stripe_fee", "Dispute fee")
    ]
    assert dispute["is_charge_refundable"] is False
    assert dispute["payment_method_details"]["card"]["case_type"] == "chargeback"
    (event,) = _events(client, "charge.dispute.funds_withdrawn")
    assert event["data"]["object"]["id"] == dispute["id"]
    assert event["data"]["object"]["balance_transactions"] == [withdrawal]
    # The same entry of the account's ledger, served by /v1/balance_transactions.
    assert client.v1.balance_transactions.retrieve(withdrawal["id"]).to_dict() == withdrawal
    listed = client.v1.balance_transactions.list(params={"source": dispute["id"]}).data
    assert [t.id for t in listed] == [withdrawal["id"]]


@pytest.mark.stripe_behaviour(
    "A won dispute reinstates the disputed amount (charge.dispute.funds_reinstated, a second "
    "balance transaction); the dispute received fee is not returned",
    source=DISPUTES_TOPIC,
)
def test_a_won_dispute_reinstates_the_amount_but_not_the_fee(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    opened = sandbox.open_dispute(paid_charge(client, 5000), reason="fraudulent", amount=3000)
    client.v1.disputes.update(opened["id"], params={"evidence": {"uncategorized_text": "Ours."}})
    sandbox.set_dispute_status(opened["id"], "won")
    dispute = client.v1.disputes.retrieve(opened["id"]).to_dict()
    withdrawal, reinstatement = dispute["balance_transactions"]
    assert (reinstatement["type"], reinstatement["reporting_category"]) == (
        "adjustment",
        "dispute_reversal",
    )
    assert (reinstatement["amount"], reinstatement["fee"], reinstatement["net"]) == (3000, 0, 3000)
    assert reinstatement["source"] == dispute["id"]
    assert withdrawal["net"] + reinstatement["net"] == -DISPUTE_FEE
    (event,) = _events(client, "charge.dispute.funds_reinstated")
    assert event["data"]["object"]["id"] == dispute["id"]
    assert [t["id"] for t in event["data"]["object"]["balance_transactions"]] == [
        withdrawal["id"],
        reinstatement["id"],
    ]


@pytest.mark.stripe_behaviour(
    "A lost dispute moves no more money: what was withdrawn stays withdrawn",
    source=DISPUTES_TOPIC,
)
def test_a_lost_dispute_moves_no_more_money(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    opened = sandbox.open_dispute(paid_charge(client, 5000), reason="fraudulent")
    client.v1.disputes.close(opened["id"])
    dispute = client.v1.disputes.retrieve(opened["id"])
    assert dispute.status == "lost"
    assert [t.amount for t in dispute.balance_transactions] == [-5000]
    assert _events(client, "charge.dispute.funds_reinstated") == []


@pytest.mark.stripe_behaviour(
    "An inquiry (warning_needs_response, case_type inquiry) withdraws no funds and its charge "
    "can still be refunded (is_charge_refundable true)",
    source=INQUIRIES,
)
def test_an_inquiry_withdraws_nothing_and_its_charge_is_refundable(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute = client.v1.disputes.retrieve(_inquiry(client, sandbox)).to_dict()
    assert dispute["status"] == "warning_needs_response"
    assert dispute["payment_method_details"]["card"]["case_type"] == "inquiry"
    assert dispute["is_charge_refundable"] is True
    assert dispute["balance_transactions"] == []
    assert _events(client, "charge.dispute.funds_withdrawn") == []


@pytest.mark.stripe_behaviour(
    "A refund of a charge under an inquiry is allowed; once the charge is fully refunded the "
    "dispute's is_charge_refundable is false",
    source=INQUIRIES,
)
def test_the_charge_of_an_inquiry_can_be_refunded(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _inquiry(client, sandbox)
    charge_id = str(client.v1.disputes.retrieve(dispute_id).charge)
    part = client.v1.refunds.create(params={"charge": charge_id, "amount": 2000})
    assert part.status == "succeeded"
    assert client.v1.disputes.retrieve(dispute_id).is_charge_refundable is True
    client.v1.refunds.create(params={"charge": charge_id})
    assert client.v1.charges.retrieve(charge_id).amount_refunded == 5000
    assert client.v1.disputes.retrieve(dispute_id).is_charge_refundable is False


@pytest.mark.stripe_behaviour(
    "A refund of a charged-back charge is refused: charge_disputed",
    source=ERROR_CODES,
)
def test_the_charge_of_a_chargeback_cannot_be_refunded(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 5000)
    sandbox.open_dispute(charge_id, reason="fraudulent")
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    assert (raised.value.code, raised.value.http_status) == ("charge_disputed", 400)
    assert client.v1.charges.retrieve(charge_id).amount_refunded == 0


@pytest.mark.stripe_behaviour(
    "An inquiry escalated to a chargeback withdraws the funds then and is no longer refundable",
    source=INQUIRIES,
)
def test_an_inquiry_escalating_to_a_chargeback_withdraws_the_funds_then(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _inquiry(client, sandbox)
    sandbox.set_dispute_status(dispute_id, "needs_response")
    dispute = client.v1.disputes.retrieve(dispute_id).to_dict()
    assert dispute["payment_method_details"]["card"]["case_type"] == "chargeback"
    assert dispute["is_charge_refundable"] is False
    assert [(t["amount"], t["fee"]) for t in dispute["balance_transactions"]] == [
        (-5000, DISPUTE_FEE)
    ]
    (event,) = _events(client, "charge.dispute.funds_withdrawn")
    assert event["data"]["object"]["id"] == dispute_id
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params={"charge": dispute["charge"]})
    assert raised.value.code == "charge_disputed"


@pytest.mark.stripe_behaviour(
    "After the payment has been fully refunded, no further funds are withdrawn as a result of "
    "the dispute (SDK: Dispute.is_charge_refundable)",
    source="https://docs.stripe.com/api/disputes/object#dispute_object-is_charge_refundable",
)
def test_a_fully_refunded_inquiry_escalating_withdraws_nothing(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _inquiry(client, sandbox)
    client.v1.refunds.create(params={"charge": client.v1.disputes.retrieve(dispute_id).charge})
    sandbox.set_dispute_status(dispute_id, "needs_response")
    assert client.v1.disputes.retrieve(dispute_id).balance_transactions == []
    assert _events(client, "charge.dispute.funds_withdrawn") == []


def test_the_control_route_refuses_an_unknown_case_type(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    with pytest.raises(Exception, match="case_type"):
        sandbox.open_dispute(paid_charge(client, 5000), case_type="block")
