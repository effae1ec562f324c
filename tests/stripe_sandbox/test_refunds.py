"""Refunds through the official SDK: Stripe's over-refund errors, statuses, lists and cancel."""

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

EXPAND_REFUNDS = "https://docs.stripe.com/changelog/2022-11-15/deprecates-charges-auto-expand"
REFUND_OBJECT = "https://docs.stripe.com/api/refunds/object"


def test_refund_by_charge_with_amount_reason_and_metadata(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(
        params={
            "charge": charge_id,
            "amount": 300,
            "reason": "requested_by_customer",
            "metadata": {"vouch_leg": "leg_1", "vouch_refund": "erf_1"},
        }
    )
    assert refund.id.startswith("re_")
    assert (refund.object, refund.status, refund.amount, refund.currency) == (
        "refund",
        "succeeded",
        300,
        "usd",
    )
    assert (refund.charge, refund.reason) == (charge_id, "requested_by_customer")
    assert refund.metadata.to_dict() == {"vouch_leg": "leg_1", "vouch_refund": "erf_1"}
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    assert (charge.amount_refunded, charge.refunded) == (300, False)
    assert [r.id for r in charge.refunds.data] == [refund.id]
    assert sandbox.state()["charges"][charge_id]["amount_refunded"] == 300


def test_refund_by_payment_intent_defaults_to_the_whole_remainder(
    client: stripe.StripeClient,
) -> None:
    charge_id = paid_charge(client, 1000)
    pi_id = client.v1.charges.retrieve(charge_id).payment_intent
    client.v1.refunds.create(params={"charge": charge_id, "amount": 250})
    refund = client.v1.refunds.create(params={"payment_intent": pi_id})
    assert (refund.amount, refund.charge, refund.payment_intent) == (750, charge_id, pi_id)
    charge = client.v1.charges.retrieve(charge_id)
    assert (charge.amount_refunded, charge.refunded) == (1000, True)


def test_over_refund_is_refused_with_amount_too_large(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(params={"charge": charge_id, "amount": 600})
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 401})
    assert (raised.value.http_status, raised.value.code, raised.value.param) == (
        400,
        "amount_too_large",
        "amount",
    )
    assert "($4.01)" in str(raised.value)
    assert "($4.00)" in str(raised.value)
    assert sandbox.state()["charges"][charge_id]["amount_refunded"] == 600
    assert client.v1.refunds.create(params={"charge": charge_id, "amount": 400}).amount == 400


def test_fully_refunded_charge_is_refused_with_charge_already_refunded(
    client: stripe.StripeClient,
) -> None:
    charge_id = paid_charge(client, 1000)
    client.v1.refunds.create(params={"charge": charge_id})
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 1})
    assert raised.value.code == "charge_already_refunded"


def test_refund_of_a_disputed_charge_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    sandbox.open_dispute(charge_id, reason="fraudulent")
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    assert raised.value.code == "charge_disputed"
    assert sandbox.state()["charges"][charge_id]["refunds"] == 0


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "parameter_missing"),
        ({"charge": "ch_missing"}, "resource_missing"),
        ({"payment_intent": "pi_missing"}, "resource_missing"),
        ({"charge": "CHARGE", "amount": 0}, "parameter_invalid_integer"),
        ({"charge": "CHARGE", "amount": -5}, "parameter_invalid_integer"),
        # An enum's wrong value: Stripe names the values, with no code.
        ({"charge": "CHARGE", "reason": "because"}, None),
        ({"charge": "CHARGE", "surprise": "x"}, "parameter_unknown"),
    ],
)
def test_bad_refund_parameters(
    client: stripe.StripeClient, sandbox: SandboxControl, params: dict, code: str | None
) -> None:
    charge_id = paid_charge(client, 1000)
    params = {k: (charge_id if v == "CHARGE" else v) for k, v in params.items()}
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.refunds.create(params=params)
    assert raised.value.code == code
    assert sandbox.state()["counts"]["refunds"] == 0


def test_retrieve_and_update_metadata(client: stripe.StripeClient) -> None:
    refund = client.v1.refunds.create(
        params={"charge": paid_charge(client), "metadata": {"a": "1", "b": "2"}}
    )
    updated = client.v1.refunds.update(refund.id, params={"metadata": {"a": "", "c": "3"}})
    assert updated.metadata.to_dict() == {"b": "2", "c": "3"}
    assert client.v1.refunds.retrieve(refund.id).metadata.to_dict() == {"b": "2", "c": "3"}


def test_list_filters_newest_first_and_paginates(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 100_000)
    other_charge = paid_charge(client, 1000)
    made = [
        client.v1.refunds.create(params={"charge": charge_id, "amount": 10 + i}).id
        for i in range(25)
    ]
    client.v1.refunds.create(params={"charge": other_charge, "amount": 5})
    newest_first = list(reversed(made))

    page = client.v1.refunds.list(params={"charge": charge_id, "limit": 10})
    assert [r.id for r in page.data] == newest_first[:10]
    assert page.has_more is True
    seen = [r.id for r in page.data]
    while page.has_more:
        page = client.v1.refunds.list(
            params={"charge": charge_id, "limit": 10, "starting_after": seen[-1]}
        )
        seen += [r.id for r in page.data]
    assert seen == newest_first
    assert [
        r.id
        for r in client.v1.refunds.list(
            params={"charge": charge_id, "limit": 100}
        ).auto_paging_iter()
    ] == newest_first
    before = client.v1.refunds.list(
        params={"charge": charge_id, "ending_before": newest_first[5], "limit": 3}
    )
    assert [r.id for r in before.data] == newest_first[2:5]

    pi_id = client.v1.charges.retrieve(charge_id).payment_intent
    by_pi = client.v1.refunds.list(params={"payment_intent": pi_id, "limit": 100})
    assert [r.id for r in by_pi.data] == newest_first
    assert len(client.v1.refunds.list(params={"limit": 100}).data) == 26


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"starting_after": "re_missing"}])
def test_bad_list_parameters(client: stripe.StripeClient, params: dict) -> None:
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.refunds.list(params=params)


@pytest.mark.parametrize(
    ("status", "gives_back"), [("pending", False), ("failed", True), ("canceled", True)]
)
def test_status_changes_and_what_they_give_back(
    client: stripe.StripeClient, sandbox: SandboxControl, status: str, gives_back: bool
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 400})
    if status == "canceled":
        sandbox.set_refund_status(refund.id, "requires_action")
    sandbox.set_refund_status(
        refund.id, status, "lost_or_stolen_card" if status == "failed" else None
    )
    stored = client.v1.refunds.retrieve(refund.id)
    assert stored.status == status
    charge = client.v1.charges.retrieve(charge_id)
    assert charge.amount_refunded == (0 if gives_back else 400)
    if status == "failed":
        assert stored.failure_reason == "lost_or_stolen_card"
        # The money is back on the charge: it can be refunded again.
        assert client.v1.refunds.create(params={"charge": charge_id}).amount == 1000


def test_cancel_only_from_requires_action(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 400})
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.refunds.cancel(refund.id)
    assert client.v1.refunds.retrieve(refund.id).status == "succeeded"
    sandbox.set_refund_status(refund.id, "requires_action")
    canceled = client.v1.refunds.cancel(refund.id)
    assert canceled.status == "canceled"
    assert client.v1.charges.retrieve(charge_id).amount_refunded == 0


def test_terminal_refund_statuses_do_not_move(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    refund = client.v1.refunds.create(params={"charge": paid_charge(client), "amount": 100})
    sandbox.set_refund_status(refund.id, "failed")
    with pytest.raises(RuntimeError, match="400"):
        sandbox.set_refund_status(refund.id, "succeeded")


@pytest.mark.stripe_behaviour(
    "a charge's refunds are included only when expanded (expand[]=refunds, or data.refunds in "
    "a list)",
    source=EXPAND_REFUNDS,
)
def test_charge_refunds_only_when_expanded(client: stripe.StripeClient) -> None:
    charge_id = paid_charge(client, 1000)
    made = [
        client.v1.refunds.create(params={"charge": charge_id, "amount": 10}).id for _ in range(3)
    ]
    plain = client.v1.charges.retrieve(charge_id).to_dict()
    assert "refunds" not in plain
    assert plain["amount_refunded"] == 30
    expanded = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]}).to_dict()
    assert expanded["refunds"]["object"] == "list"
    assert [r["id"] for r in expanded["refunds"]["data"]] == made[::-1]
    assert expanded["refunds"]["has_more"] is False
    assert expanded["refunds"]["url"] == f"/v1/charges/{charge_id}/refunds"
    listed = client.v1.charges.list().data[0].to_dict()
    assert "refunds" not in listed
    with_refunds = client.v1.charges.list(params={"expand": ["data.refunds"]}).data[0]
    assert [r.id for r in with_refunds.refunds.data] == made[::-1]
    event = client.v1.events.list(params={"type": "charge.refunded", "limit": 1}).data[0]
    assert "refunds" not in event.data.object.to_dict()


@pytest.mark.stripe_behaviour(
    "a pending refund says why (pending_reason), a failed one its failure_reason and "
    "failure_balance_transaction, one requiring action its next_action; each only in that status",
    source=REFUND_OBJECT,
)
def test_conditional_refund_fields_follow_the_status(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100}).to_dict()
    for name in ("pending_reason", "failure_reason", "failure_balance_transaction", "next_action"):
        assert name not in refund
    sandbox.set_refund_status(refund["id"], "pending")
    pending = client.v1.refunds.retrieve(refund["id"]).to_dict()
    assert (pending["status"], pending["pending_reason"]) == ("pending", "processing")
    sandbox.set_refund_status(refund["id"], "requires_action")
    waiting = client.v1.refunds.retrieve(refund["id"]).to_dict()
    assert "pending_reason" not in waiting
    assert waiting["next_action"]["type"] == "display_details"
    sandbox.set_refund_status(refund["id"], "failed", "expired_or_canceled_card")
    failed = client.v1.refunds.retrieve(refund["id"]).to_dict()
    assert "next_action" not in failed
    assert failed["failure_reason"] == "expired_or_canceled_card"
    assert failed["failure_balance_transaction"].startswith("txn_")
