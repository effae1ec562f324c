"""The sandbox's objects carry every top-level field of Stripe's published fixture, and every
top-level field the pinned SDK's resource classes declare in the states Stripe shows them."""

import json
from pathlib import Path
from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import CARD_ONLY, paid_charge

FIELDS = json.loads((Path(__file__).parent / "fixture_fields.json").read_text())

# Fields the SDK declares that Stripe shows only in states the sandbox does not make (each with
# why): a gap, listed, never papered over with a null Stripe would not send.
ABSENT: dict[str, dict[str, str]] = {
    "payment_intent": {
        "hooks": "only when `hooks` was given (tax calculation automations)",
        "payment_details": "only when industry-specific `payment_details` were given",
        "payment_record": "only for a PaymentIntent that made a Payment Record",
        "presentment_details": "only with Adaptive Pricing (a presentment currency)",
    },
    "charge": {
        "authorization_code": "not shown on card charges (the code is in "
        "payment_method_details.card.authorization_code)",
        "level3": "only when Level III data was sent",
        "presentment_details": "only with Adaptive Pricing (a presentment currency)",
        "radar_options": "only when `radar_options` (a Radar session) was given",
        "transfer": "only for a destination charge (Connect)",
    },
    "refund": {
        "description": "available on non-card refunds only",
        "instructions_email": "only for payment methods without native refunds",
        "presentment_details": "only with Adaptive Pricing (a presentment currency)",
    },
    "balance_transaction": {},
}
CLASSES = {
    "payment_intent": stripe.PaymentIntent,
    "charge": stripe.Charge,
    "refund": stripe.Refund,
    "balance_transaction": stripe.BalanceTransaction,
}


def _objects(client: stripe.StripeClient, sandbox: SandboxControl) -> dict[str, dict]:
    charge_id = paid_charge(client)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    dispute = sandbox.open_dispute(charge_id)
    charge = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    return {
        "refund": client.v1.refunds.retrieve(refund.id).to_dict(),
        "charge": charge.to_dict(),
        "dispute": client.v1.disputes.retrieve(dispute["id"]).to_dict(),
        "event": client.v1.events.list(params={"limit": 1}).data[0].to_dict(),
        "payment_intent": client.v1.payment_intents.retrieve(str(charge.payment_intent)).to_dict(),
    }


@pytest.mark.parametrize("kind", ["refund", "charge", "dispute", "event", "payment_intent"])
def test_every_fixture_field_is_present(
    client: stripe.StripeClient, sandbox: SandboxControl, kind: str
) -> None:
    obj = _objects(client, sandbox)[kind]
    missing = sorted(set(FIELDS[kind]) - set(obj))
    assert missing == [], f"{kind} lacks {missing}"
    assert obj["object"] == kind


def test_file_fields_are_present(client: stripe.StripeClient) -> None:
    import io

    handle = io.BytesIO(b"%PDF-1.4")
    handle.name = "a.pdf"
    uploaded = client.v1.files.create(
        params={"purpose": "dispute_evidence", "file": handle}
    ).to_dict()
    assert sorted(set(FIELDS["file"]) - set(uploaded)) == []


def _every_state(client: stripe.StripeClient, sandbox: SandboxControl) -> dict[str, list[dict]]:
    """Each kind in every state the sandbox makes, as the API answers it."""
    seen: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CLASSES}
    card = {"amount": 1000, "currency": "usd", **CARD_ONLY}
    waiting = client.v1.payment_intents.create(params=card)
    three_ds = client.v1.payment_intents.create(
        params={**card, "payment_method": "pm_card_threeDSecure2Required", "confirm": True}
    )
    canceled = client.v1.payment_intents.cancel(waiting.id)
    with pytest.raises(stripe.CardError) as declined:
        client.v1.payment_intents.create(
            params={**card, "payment_method": "pm_card_chargeDeclined", "confirm": True}
        )
    charge_id = paid_charge(client, 5000)
    refunds = [
        client.v1.refunds.create(params={"charge": charge_id, "amount": 100}).id for _ in range(4)
    ]
    sandbox.set_refund_status(refunds[1], "pending")
    sandbox.set_refund_status(refunds[2], "requires_action")
    sandbox.set_refund_status(refunds[3], "failed", "declined")
    seen["payment_intent"] = [
        three_ds.to_dict(),
        canceled.to_dict(),
        *(pi.to_dict() for pi in client.v1.payment_intents.list().data),
    ]
    expanded = client.v1.charges.retrieve(charge_id, params={"expand": ["refunds"]})
    failed_charge = client.v1.charges.retrieve(declined.value.error.charge)
    seen["charge"] = [expanded.to_dict(), failed_charge.to_dict()]
    seen["refund"] = [client.v1.refunds.retrieve(r).to_dict() for r in refunds]
    seen["balance_transaction"] = [t.to_dict() for t in client.v1.balance_transactions.list().data]
    return seen


@pytest.mark.stripe_behaviour(
    "every top-level field the pinned SDK declares for PaymentIntent, Charge, Refund and "
    "BalanceTransaction is returned in the states Stripe shows it",
    source="https://docs.stripe.com/api/payment_intents/object",
)
def test_every_field_the_sdk_declares_is_returned(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    seen = _every_state(client, sandbox)
    for kind, cls in CLASSES.items():
        declared = {name for name in cls.__annotations__ if name != "OBJECT_NAME"}
        returned = set().union(*(set(obj) for obj in seen[kind]))
        assert sorted(declared - returned) == sorted(ABSENT[kind]), kind
        assert returned - declared == set(), f"{kind} returns fields the SDK does not declare"
        share = len(declared & returned) / len(declared)
        print(f"{kind}: {len(declared & returned)}/{len(declared)} = {share:.0%}")
