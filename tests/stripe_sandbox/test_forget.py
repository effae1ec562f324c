"""`/_sandbox/forget/{id}`: an object the provider no longer holds (a refund Vouch recorded that
Stripe does not have) — gone from retrieve, lists and indexes, and nothing else changed."""

from collections.abc import Callable
from typing import Any

import pytest
import requests
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


def _missing(retrieve: Callable[[str], Any], object_id: str) -> None:
    with pytest.raises(stripe.InvalidRequestError) as caught:
        retrieve(object_id)
    assert caught.value.http_status == 404
    assert caught.value.code == "resource_missing"


def test_a_forgotten_refund_is_gone_and_its_charge_unchanged(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    kept = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    lost = client.v1.refunds.create(
        params={"charge": charge_id, "amount": 300, "metadata": {"vouch_leg": "leg_1"}}
    )
    before = client.v1.charges.retrieve(charge_id)
    events_before = len(client.v1.events.list(params={"limit": 100}).data)

    assert sandbox.forget(lost.id) == {"forgotten": lost.id, "object": "refund"}

    _missing(client.v1.refunds.retrieve, lost.id)
    assert [r.id for r in client.v1.refunds.list(params={"limit": 100}).data] == [kept.id]
    by_charge = client.v1.refunds.list(params={"charge": charge_id, "limit": 100})
    assert [r.id for r in by_charge.data] == [kept.id]
    pi = before.payment_intent
    by_pi = client.v1.refunds.list(params={"payment_intent": pi, "limit": 100})
    assert [r.id for r in by_pi.data] == [kept.id]
    after = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    assert [r.id for r in after.refunds.data] == [kept.id]
    # The charge still counts the refund the provider no longer shows.
    assert (after.amount_refunded, after.refunded) == (400, False)
    assert after.amount_refunded == before.amount_refunded
    assert client.v1.refunds.retrieve(kept.id).to_dict() == kept.to_dict()
    assert len(client.v1.events.list(params={"limit": 100}).data) == events_before
    # What was refunded stays refunded: the charge has 600 left, not 900.
    with pytest.raises(stripe.InvalidRequestError) as caught:
        client.v1.refunds.create(params={"charge": charge_id, "amount": 601})
    assert caught.value.code == "amount_too_large"


def test_a_forgotten_charge_leaves_its_refunds_and_payment_intent(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    other = paid_charge(client, 2000)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    pi_id = str(client.v1.charges.retrieve(charge_id).payment_intent)

    sandbox.forget(charge_id)

    _missing(client.v1.charges.retrieve, charge_id)
    assert [c.id for c in client.v1.charges.list().data] == [other]
    assert client.v1.charges.list(params={"payment_intent": pi_id}).data == []
    assert client.v1.payment_intents.retrieve(pi_id).latest_charge == charge_id
    assert client.v1.refunds.retrieve(refund.id).charge == charge_id
    listed = client.v1.refunds.list(params={"charge": charge_id}).data
    assert [r.id for r in listed] == [refund.id]
    # A refund of a charge the provider lost still moves (and nothing breaks).
    assert sandbox.set_refund_status(refund.id, "failed")["status"] == "failed"


def test_a_forgotten_dispute_leaves_its_charge_disputed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    dispute = sandbox.open_dispute(charge_id)

    sandbox.forget(dispute["id"])

    _missing(client.v1.disputes.retrieve, dispute["id"])
    assert client.v1.disputes.list().data == []
    assert client.v1.disputes.list(params={"charge": charge_id}).data == []
    assert client.v1.charges.retrieve(charge_id).disputed is True


def test_a_forgotten_payment_intent_and_event(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    pi = client.v1.payment_intents.create(
        params={
            "amount": 1000,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "metadata": {"vouch_funding": "f1"},
            "allowed_payment_method_types": ["card"],
        }
    )
    event = client.v1.events.list(params={"type": "charge.succeeded"}).data[0]

    sandbox.forget(pi.id)
    sandbox.forget(event.id)

    _missing(client.v1.payment_intents.retrieve, pi.id)
    found = client.v1.payment_intents.search(params={"query": "metadata['vouch_funding']:'f1'"})
    assert found.data == []
    assert client.v1.charges.retrieve(str(pi.latest_charge)).payment_intent == pi.id
    _missing(client.v1.events.retrieve, event.id)
    types = [e.type for e in client.v1.events.list().data]
    assert types == ["payment_intent.succeeded", "payment_intent.created"]
    assert client.v1.events.list(params={"type": "charge.*"}).data == []
    assert sandbox.state()["counts"]["events"] == 2


def test_a_forgotten_object_is_no_cursor(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    refunds = [
        client.v1.refunds.create(params={"charge": charge_id, "amount": 10}).id for _ in range(3)
    ]
    sandbox.forget(refunds[1])
    page = client.v1.refunds.list(params={"starting_after": refunds[2]})
    assert [r.id for r in page.data] == [refunds[0]]
    with pytest.raises(stripe.InvalidRequestError) as caught:
        client.v1.refunds.list(params={"starting_after": refunds[1]})
    assert caught.value.code == "resource_missing"


def test_unknown_and_twice_forgotten_ids_are_404(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    charge_id = paid_charge(client, 1000)
    sandbox.forget(charge_id)
    for object_id in ("re_nothing", charge_id):
        response = requests.post(f"{sandbox.url}/_sandbox/forget/{object_id}", timeout=5)
        assert response.status_code == 404
        assert response.json()["error"]["type"] == "sandbox_error"
