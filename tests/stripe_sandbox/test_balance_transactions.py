"""Balance transactions: the ledger entries charges, refunds and refund failures make, as Stripe
shows them (GET /v1/balance_transactions[/{id}], `expand[]=balance_transaction`)."""

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import CARD_ONLY, paid_charge

OBJECT = "https://docs.stripe.com/api/balance_transactions/object"
LIST = "https://docs.stripe.com/api/balance_transactions/list"
PRICING = "https://stripe.com/pricing"
REFUND_FEES = "https://docs.stripe.com/refunds"


def _txn(client: stripe.StripeClient, txn_id: object) -> dict:
    assert isinstance(txn_id, str), txn_id
    assert txn_id.startswith("txn_"), txn_id
    return client.v1.balance_transactions.retrieve(txn_id).to_dict()


@pytest.mark.stripe_behaviour(
    "a succeeded card charge makes a balance transaction of type charge, with Stripe's fee "
    "(2.9% + 30 cents for US cards) and the net",
    source=PRICING,
)
@pytest.mark.parametrize(("amount", "fee"), [(1000, 59), (1234, 66), (10_000, 320)])
def test_a_charge_makes_a_balance_transaction_with_stripes_fee(
    client: stripe.StripeClient, amount: int, fee: int
) -> None:
    charge = client.v1.charges.retrieve(paid_charge(client, amount))
    txn = _txn(client, charge.balance_transaction)
    assert (txn["type"], txn["reporting_category"], txn["source"]) == (
        "charge",
        "charge",
        charge.id,
    )
    assert (txn["amount"], txn["fee"], txn["net"], txn["currency"]) == (
        amount,
        fee,
        amount - fee,
        "usd",
    )
    assert txn["fee_details"] == [
        {
            "amount": fee,
            "application": None,
            "currency": "usd",
            "description": "Stripe processing fees",
            "type": "stripe_fee",
        }
    ]
    assert txn["status"] == "pending"
    assert txn["available_on"] > txn["created"]
    expanded = client.v1.charges.retrieve(charge.id, params={"expand": ["balance_transaction"]})
    assert expanded.balance_transaction.id == txn["id"]
    assert expanded.balance_transaction.net == amount - fee


def test_a_declined_charge_has_no_balance_transaction(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    with pytest.raises(stripe.CardError) as raised:
        client.v1.payment_intents.create(
            params={
                "amount": 1000,
                "currency": "usd",
                "payment_method": "pm_card_chargeDeclined",
                "confirm": True,
                **CARD_ONLY,
            }
        )
    assert client.v1.charges.retrieve(raised.value.error.charge).balance_transaction is None
    assert client.v1.balance_transactions.list().data == []


@pytest.mark.stripe_behaviour(
    "a refund makes a balance transaction of type refund, negative, with no fee returned",
    source=REFUND_FEES,
)
def test_a_refund_makes_a_negative_balance_transaction(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 400})
    txn = _txn(client, refund.balance_transaction)
    assert (txn["type"], txn["reporting_category"], txn["source"]) == (
        "refund",
        "refund",
        refund.id,
    )
    assert (txn["amount"], txn["fee"], txn["net"], txn["fee_details"]) == (-400, 0, -400, [])
    # The charge's fee stays charged: Stripe does not return it on a refund.
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["balance_transaction"]})
    assert charge.balance_transaction.fee == 59
    expanded = client.v1.refunds.retrieve(refund.id, params={"expand": ["balance_transaction"]})
    assert expanded.balance_transaction.amount == -400


@pytest.mark.stripe_behaviour(
    "a refund that fails gets a failure_balance_transaction (type refund_failure) giving the "
    "amount back",
    source=OBJECT,
)
def test_a_failed_refund_gets_a_refund_failure_balance_transaction(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    refund = client.v1.refunds.create(params={"charge": paid_charge(client, 1000), "amount": 250})
    sandbox.set_refund_status(refund.id, "failed", "lost_or_stolen_card")
    failed = client.v1.refunds.retrieve(refund.id)
    assert failed.balance_transaction != failed.failure_balance_transaction
    txn = _txn(client, failed.failure_balance_transaction)
    assert (txn["type"], txn["reporting_category"], txn["source"]) == (
        "refund_failure",
        "refund_failure",
        refund.id,
    )
    assert (txn["amount"], txn["fee"], txn["net"]) == (250, 0, 250)


@pytest.mark.stripe_behaviour(
    "balance transactions are listed newest first, filtered by type, source, currency and "
    "created, with Stripe's cursors",
    source=LIST,
)
def test_list_filters_and_pages(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    first = paid_charge(client, 1000)
    sandbox.advance_clock(10)
    second = paid_charge(client, 2000)
    refund = client.v1.refunds.create(params={"charge": second, "amount": 100})
    everything = client.v1.balance_transactions.list().data
    assert [t.source for t in everything] == [refund.id, second, first]
    charges = client.v1.balance_transactions.list(params={"type": "charge"}).data
    assert [t.source for t in charges] == [second, first]
    by_source = client.v1.balance_transactions.list(params={"source": first}).data
    assert [t.amount for t in by_source] == [1000]
    assert client.v1.balance_transactions.list(params={"currency": "eur"}).data == []
    assert len(client.v1.balance_transactions.list(params={"currency": "usd"}).data) == 3
    created = everything[-1].created
    newer = client.v1.balance_transactions.list(params={"created": {"gt": created}}).data
    assert [t.source for t in newer] == [refund.id, second]
    page = client.v1.balance_transactions.list(params={"limit": 2})
    assert page.has_more is True
    rest = client.v1.balance_transactions.list(params={"starting_after": page.data[-1].id})
    assert [t.source for t in rest.data] == [first]
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.v1.balance_transactions.retrieve("txn_missing")
    assert (missing.value.http_status, missing.value.code) == (404, "resource_missing")


def test_seeded_charges_and_refunds_have_their_balance_transactions(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    [seeded] = sandbox.seed(
        [{"amount": 1000, "refunds": [{"amount": 300}, {"amount": 200, "status": "failed"}]}]
    )
    charge = client.v1.charges.retrieve(seeded["id"])
    assert _txn(client, charge.balance_transaction)["fee"] == 59
    ok, failed = (client.v1.refunds.retrieve(r) for r in seeded["refunds"])
    assert _txn(client, ok.balance_transaction)["amount"] == -300
    assert _txn(client, failed.failure_balance_transaction)["amount"] == 200
    kinds = sorted(t.type for t in client.v1.balance_transactions.list().data)
    assert kinds == ["charge", "refund", "refund", "refund_failure"]
