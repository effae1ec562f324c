"""A charge receipt keeps its card's brand and fingerprint, the card's identity and not its number
(Visa CE 3.0 asks for prior charges on the same card: docs/decisions/0012-ce3-data-elements-in-
receipts.md); everything else about the card is still dropped, at any depth."""

from __future__ import annotations

from typing import Any

import pytest

from receipts.redaction import redact
from receipts.selectors import receipt_verify

from .conftest import Shop, charge_receipt

CARD: dict[str, Any] = {
    "brand": "visa",
    "fingerprint": "Xt5EWLLDS7FJjR1c",
    "last4": "4242",
    "number": "4242424242424242",
    "exp_month": 12,
    "exp_year": 2034,
    "cvc_check": "pass",
    "country": "US",
    "funding": "credit",
    "network": "visa",
    "checks": {"cvc_check": "pass", "address_line1_check": None},
    "three_d_secure": None,
    "wallet": {"type": "apple_pay", "dynamic_last4": "0005"},
}


def charge(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": "ch_card",
        "object": "charge",
        "amount": 1000,
        "billing_details": {
            "name": "Alice",
            "email": "alice@example.com",
            "address": {"line1": "1 Main St", "postal_code": "94107"},
            "phone": "+15555550100",
        },
        "payment_method_details": {"type": "card", "card": dict(CARD)},
        "source": {"object": "card", "last4": "4242", "exp_month": 12, "fingerprint": "other"},
        "metadata": {"vouch_ip": "203.0.113.7", "ip": "not ours"},
    }
    obj.update(overrides)
    return obj


def test_brand_and_fingerprint_are_kept_and_nothing_else_of_the_card() -> None:
    assert redact("charge", charge()) == {
        "id": "ch_card",
        "object": "charge",
        "amount": 1000,
        "payment_method_details": {
            "type": "card",
            "card": {"brand": "visa", "fingerprint": "Xt5EWLLDS7FJjR1c"},
        },
        "metadata": {"vouch_ip": "203.0.113.7"},
    }


def test_a_card_field_that_is_not_a_scalar_is_dropped_and_a_missing_card_is_absent() -> None:
    odd = dict(CARD, fingerprint={"value": "Xt5"}, brand=1.5)
    assert redact("charge", charge(payment_method_details={"type": "card", "card": odd}))[
        "payment_method_details"
    ] == {"type": "card", "card": {}}
    for details in ({"type": "sepa_debit"}, {"type": "card", "card": "4242"}):
        assert redact("charge", charge(payment_method_details=details))[
            "payment_method_details"
        ] == {"type": details["type"]}
    assert "payment_method_details" not in redact("charge", charge(payment_method_details=None))


def test_a_refund_keeps_no_card() -> None:
    refund = {"id": "re_1", "object": "refund", "payment_method_details": {"card": dict(CARD)}}
    assert redact("refund", refund) == {"id": "re_1", "object": "refund"}


@pytest.mark.django_db
def test_the_sandboxs_charge_receipt_names_its_card_and_verifies(shop: Shop) -> None:
    receipt = charge_receipt(shop.fund())
    assert receipt.body["detail"]["payment_method_details"] == {
        "type": "card",
        "card": {"brand": "visa", "fingerprint": "SbxFp4242"},  # the sandbox's fingerprint
    }
    for dropped in ("last4", "exp_month", "exp_year", "billing_details", "network", "checks"):
        assert f'"{dropped}"' not in receipt.canonical
    assert receipt_verify(receipt).ok
