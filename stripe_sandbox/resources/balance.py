"""Balance transactions: the account's ledger (GET /v1/balance_transactions[/{id}]), written by
every resource that moves money through `balance_transaction_add`."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.objects.balance import balance_transaction
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _page, retriever
from stripe_sandbox.state import RequestContext, State

balance_transaction_retrieve = retriever("balance_transactions", "balance_transaction")


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
    created: int | None = None,
) -> dict[str, Any]:
    """A new balance transaction, kept and listable, created now on the sandbox clock (or at
    `created`, for what the seed makes in the past). Answers the stored object (its `id` is what
    the charge, refund or dispute names)."""
    txn = balance_transaction(
        amount=amount,
        currency=currency,
        type=type,
        reporting_category=reporting_category,
        source=source,
        created=state.clock.now_int() if created is None else created,
        fee_details=fee_details,
        description=description,
    )
    state.store(txn)
    return txn


def balance_transaction_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """Newest first with Stripe's cursors and `created`; filtered by `type`, `source` (the
    charge, refund or dispute id) and `currency` (https://docs.stripe.com/api/balance_transactions/list).
    `payout` matches nothing: the sandbox makes no payouts."""
    params = Params(data)
    wanted = {
        name: value
        for name in ("type", "source", "currency")
        if (value := params.string(name)) is not None
    }
    payout = params.string("payout")

    def keep(txn: dict[str, Any]) -> bool:
        if payout is not None:
            return False
        return all(txn[name] == value for name, value in wanted.items())

    return _page(state, "balance_transaction", params, "/v1/balance_transactions", None, keep)
