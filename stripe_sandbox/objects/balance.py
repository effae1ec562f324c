"""Balance transactions as Stripe shows them: one entry of the account's ledger per movement of
money (https://docs.stripe.com/api/balance_transactions/object; reporting categories:
https://docs.stripe.com/reports/reporting-categories)."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.ids import new_id

# Funds from a card payment become available two business days later in the US (Stripe's
# standard payout schedule); the sandbox counts calendar days.
AVAILABLE_AFTER_S = 2 * 24 * 60 * 60


def balance_transaction(
    *,
    amount: int,
    currency: str,
    type: str,
    reporting_category: str,
    source: str,
    created: int,
    fee_details: list[dict[str, Any]] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """One balance transaction: `amount` signed (negative takes money from the balance), `fee`
    the sum of `fee_details` (each `{amount, application, currency, description, type}`), `net`
    = amount - fee."""
    details = fee_details or []
    fee = sum(int(detail["amount"]) for detail in details)
    return {
        "id": new_id("txn"),
        "object": "balance_transaction",
        "amount": amount,
        "available_on": created + AVAILABLE_AFTER_S,
        "balance_type": "payments",
        "created": created,
        "currency": currency,
        "description": description,
        "exchange_rate": None,
        "fee": fee,
        "fee_details": details,
        "net": amount - fee,
        "reporting_category": reporting_category,
        "source": source,
        "status": "pending",
        "type": type,
    }


# Stripe's standard pricing for a card charge: 2.9% + 30 cents for US cards
# (https://stripe.com/pricing), every sandbox test card being a US card. The percentage is
# rounded to the nearest cent, half up.
CARD_FEE_PER_MILLE = 29
CARD_FEE_FIXED = 30


def card_fee(*, amount: int, currency: str) -> list[dict[str, Any]]:
    """The `fee_details` of a card charge of `amount`: Stripe's processing fee. A charge in
    another currency pays the same rate in its own currency (the sandbox converts nothing)."""
    fee = (amount * CARD_FEE_PER_MILLE + 500) // 1000 + CARD_FEE_FIXED
    return [fee_detail(amount=fee, currency=currency, description="Stripe processing fees")]


def fee_detail(*, amount: int, currency: str, description: str) -> dict[str, Any]:
    return {
        "amount": amount,
        "application": None,
        "currency": currency,
        "description": description,
        "type": "stripe_fee",
    }
