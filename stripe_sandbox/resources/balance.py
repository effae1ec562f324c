"""Balance transactions: the account's ledger (GET /v1/balance_transactions[/{id}]), written by
every resource that moves money through `balance_transaction_add`."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.objects.balance import balance_transaction
from stripe_sandbox.state import State


def balance_transaction_add(
    state: State,
    *,
    amount: int,
    currency: str,
    type: str,
    reporting_category: str,
    source: str,
    fee_details: list[dict[str, Any]] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """A new balance transaction, kept and listable, created now on the sandbox clock. Answers
    the stored object (its `id` is what the charge, refund or dispute names)."""
    txn = balance_transaction(
        amount=amount,
        currency=currency,
        type=type,
        reporting_category=reporting_category,
        source=source,
        created=state.clock.now_int(),
        fee_details=fee_details,
        description=description,
    )
    state.store(txn)
    return txn
