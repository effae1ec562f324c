"""Receipts carry the provider's object reduced by an allow-list (SPEC §8): nothing personal or
secret at any depth, although the provider's own objects hold such fields."""

from typing import Any

import pytest

from envelopes.models import RefundLeg
from receipts.redaction import redact
from verification.models import Observation

from .conftest import Shop, charge_receipt, refund_receipt

pytestmark = pytest.mark.django_db

# A charge keeps its card's brand and fingerprint (payment_method_details.card), the card's
# identity and not its number: docs/decisions/0012-ce3-data-elements-in-receipts.md.
FORBIDDEN = {
    "billing_details",
    "email",
    "receipt_email",
    "address",
    "name",
    "phone",
    "last4",
    "shipping",
    "customer",
}


def keys_at_any_depth(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(str(key))
            found |= keys_at_any_depth(value)
    elif isinstance(node, list):
        for item in node:
            found |= keys_at_any_depth(item)
    return found


def forbidden_in(node: Any) -> set[str]:
    return {k for k in keys_at_any_depth(node) if k in FORBIDDEN or k.startswith("exp_")}


def test_stored_detail_holds_nothing_personal_though_the_provider_object_did(shop: Shop) -> None:
    charge_id = shop.fund()
    shop.refund(1_000_000)
    charge = charge_receipt(charge_id)
    refund = refund_receipt(RefundLeg.objects.get())

    # What the deciding readback saw: the sandbox's full charge, personal fields and all.
    assert charge.verification_run.decided_by_id is not None
    native = Observation.objects.get(attempt_id=charge.verification_run.decided_by_id).data
    assert native["id"] == charge_id
    assert {"billing_details", "card", "last4", "fingerprint", "exp_month", "email", "name"} <= (
        keys_at_any_depth(native)
    )
    assert native["payment_method_details"]["card"]["last4"]
    assert forbidden_in(native)

    for receipt in (charge, refund):
        assert receipt.body["detail"]["id"] == receipt.provider_object_id
        assert forbidden_in(receipt.body) == set(), receipt.kind
        assert forbidden_in(receipt.body["detail"]) == set()
        # The sandbox's fingerprint is made of the last digits (SbxFp4242); Stripe's is not.
        for text in ("last4", "billing", "4242"):
            assert text not in receipt.canonical.replace("SbxFp4242", "")
    assert charge.body["detail"]["payment_method_details"] == {
        "type": "card",
        "card": {"brand": "visa", "fingerprint": "SbxFp4242"},
    }
    assert charge.body["detail"]["amount"] == 1000


def test_the_allow_list_keeps_only_named_fields_and_vouch_metadata() -> None:
    obj = {
        "id": "ch_1",
        "object": "charge",
        "amount": 500,
        "status": "succeeded",
        "payment_intent": {"id": "pi_1", "customer": "cus_secret", "receipt_email": "a@b.c"},
        "customer": "cus_secret",
        "receipt_email": "buyer@example.com",
        "billing_details": {"name": "Alice", "email": "alice@example.com"},
        "shipping": {"address": {"line1": "1 Main St"}},
        "payment_method_details": {
            "type": "card",
            "card": {"last4": "4242", "exp_year": 2034, "brand": "visa", "fingerprint": "Fp1"},
        },
        "metadata": {"vouch_leg": "rfl_1", "note": "call me at 555-0100", "vouch_bad": {"x": 1}},
        "captured": True,
        "description": "personal text",
        "failure_message": "free text from the network",
        "a_new_field_stripe_adds_tomorrow": "?",
        "amount_refunded": 1.5,  # not an integer: dropped rather than formatted
    }
    assert redact("charge", obj) == {
        "id": "ch_1",
        "object": "charge",
        "amount": 500,
        "status": "succeeded",
        "payment_intent": "pi_1",
        "captured": True,
        "payment_method_details": {"type": "card", "card": {"brand": "visa", "fingerprint": "Fp1"}},
        "metadata": {"vouch_leg": "rfl_1"},
    }
    with pytest.raises(ValueError, match="no allow-list"):
        redact("customer", obj)
