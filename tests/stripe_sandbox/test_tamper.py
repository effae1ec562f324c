"""`/_sandbox/tamper/{id}`: the provider's object made to differ from what Vouch recorded, on
purpose — shown by retrieve and lists, with no event and no other object touched."""

import pytest
import requests
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


def _event_count(client: stripe.StripeClient) -> int:
    return len(client.v1.events.list(params={"limit": 100}).data)


def test_tampered_charge_fields_show_in_retrieve_and_list(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 400})
    events = _event_count(client)

    shown = sandbox.tamper(charge_id, amount=999, amount_refunded=0, metadata={"x": "y"})

    assert (shown["amount"], shown["amount_refunded"], shown["metadata"]) == (999, 0, {"x": "y"})
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    assert (charge.amount, charge.amount_refunded, charge.metadata.to_dict()) == (
        999,
        0,
        {"x": "y"},
    )
    listed = client.v1.charges.list().data[0]
    assert (listed.id, listed.amount, listed.amount_refunded) == (charge_id, 999, 0)
    assert [r.id for r in charge.refunds.data] == [refund.id]
    assert client.v1.refunds.retrieve(refund.id).amount == 400
    assert _event_count(client) == events
    # The sandbox's own account, summed from the refunds, still knows what they hold.
    assert sandbox.state()["charges"][charge_id]["amount_refunded"] == 400


def test_a_tampered_refund_leaves_its_charge_alone(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refund = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 400, "metadata": {"vouch_leg": "leg_1"}}
    )
    events = _event_count(client)

    sandbox.tamper(refund.id, amount=999, metadata={}, status="pending")

    got = client.v1.refunds.retrieve(refund.id)
    assert (got.amount, got.metadata.to_dict(), got.status) == (999, {}, "pending")
    listed = client.v1.refunds.list(params={"charge": charge_id}).data[0]
    assert (listed.amount, listed.status) == (999, "pending")
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    assert (charge.amount_refunded, charge.refunds.data[0].amount) == (400, 999)
    assert _event_count(client) == events
    # A later real change gives back what the refund counted (400), not what it now claims.
    sandbox.set_refund_status(refund.id, "failed")
    assert client.v1.charges.retrieve(charge_id).amount_refunded == 0


def test_a_tampered_dispute_status_emits_nothing(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    dispute = sandbox.open_dispute(charge_id)
    events = _event_count(client)

    sandbox.tamper(dispute["id"], status="won")

    assert client.v1.disputes.retrieve(dispute["id"]).status == "won"
    assert client.v1.disputes.list(params={"charge": charge_id}).data[0].status == "won"
    assert client.v1.events.list(params={"type": "charge.dispute.closed"}).data == []
    assert _event_count(client) == events


def test_tampered_created_and_charge_move_in_lists(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    first, second = paid_charge(client, 1000), paid_charge(client, 1000)
    refunds = [client.v1.refunds.create(params={"charge": first, "amount": 10}).id for _ in "ab"]
    old = client.v1.refunds.retrieve(refunds[0]).created - 86_400

    sandbox.tamper(refunds[1], created=old, charge=second)

    assert [r.id for r in client.v1.refunds.list().data] == [refunds[0], refunds[1]]
    assert [r.id for r in client.v1.refunds.list(params={"created": {"lt": old + 1}}).data] == [
        refunds[1]
    ]
    assert [r.id for r in client.v1.refunds.list(params={"charge": second}).data] == [refunds[1]]
    assert [r.id for r in client.v1.refunds.list(params={"charge": first}).data] == [refunds[0]]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"id": "ch_other"}, 400),
        ({"object": "refund"}, 400),
        ({"amount_refundd": 0}, 400),
        ({"created": "yesterday"}, 400),
        ({"refunds": {}}, 400),
    ],
)
def test_refused_tampering_changes_nothing(
    client: stripe.StripeClient, sandbox: SandboxControl, body: dict, status: int
) -> None:
    charge_id = paid_charge(client, 1000)
    before = client.v1.charges.retrieve(charge_id).to_dict()
    response = requests.post(f"{sandbox.url}/_sandbox/tamper/{charge_id}", json=body, timeout=5)
    assert response.status_code == status
    assert response.json()["error"]["type"] == "sandbox_error"
    assert client.v1.charges.retrieve(charge_id).to_dict() == before


def test_the_same_id_and_object_are_no_change(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    shown = sandbox.tamper(charge_id, id=charge_id, object="charge", description="edited")
    assert (shown["id"], shown["description"]) == (charge_id, "edited")


def test_tampering_with_an_unknown_id_is_404(sandbox: SandboxControl) -> None:
    response = requests.post(
        f"{sandbox.url}/_sandbox/tamper/re_nothing", json={"amount": 1}, timeout=5
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "sandbox_error"
