"""Refunds: create, update, list, and their status as it moves (failed, canceled), with the
balance transactions they make."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.params import Params, merge_metadata
from stripe_sandbox.resources.balance import balance_transaction_add
from stripe_sandbox.resources.common import Result, _expand, _get, _money, _page, retriever
from stripe_sandbox.resources.dispute_funds import disputes_allow_refund
from stripe_sandbox.state import RequestContext, State

refund_retrieve = retriever("refunds", "refund")


# The reasons a refund is made with (SDK `RefundCreateParams.reason`), for the seed's own checks.
REFUND_REASONS = {"duplicate", "fraudulent", "requested_by_customer"}


def refund_create(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data)
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    amount = params.integer("amount", minimum=1)
    reason = params.string("reason")
    metadata = params.metadata() or {}
    if charge_id is None and pi_id is None:
        raise invalid(
            "One of the following params should be provided for this request: "
            "charge or payment_intent.",
            param="charge",
            code="parameter_missing",
        )
    if pi_id is not None:
        pi = state.world.payment_intents.get(pi_id)
        if pi is None:
            raise resource_missing("payment_intent", pi_id, param="payment_intent")
        if pi["status"] != "succeeded" or pi["latest_charge"] is None:
            raise StripeError(
                400,
                f"This PaymentIntent ({pi_id}) does not have a successful charge to refund.",
                code="charge_not_refundable",
                param="payment_intent",
            )
        if charge_id is not None and charge_id != pi["latest_charge"]:
            raise invalid(
                f"Charge {charge_id} does not belong to PaymentIntent {pi_id}.", param="charge"
            )
        charge_id = str(pi["latest_charge"])
    if charge_id is None:  # pragma: no cover - one of the two was given, checked above
        raise invalid("charge is required", param="charge")
    charge = state.world.charges.get(charge_id)
    if charge is None:
        raise resource_missing("charge", charge_id, param="charge")
    if charge["status"] != "succeeded":
        raise StripeError(
            400,
            f"Charge {charge_id} has not succeeded; it cannot be refunded.",
            code="charge_not_refundable",
        )
    if charge["disputed"] and not disputes_allow_refund(state, charge_id):
        raise StripeError(
            400,
            "The charge you're attempting to refund has been charged back.",
            code="charge_disputed",
            param="charge",
        )
    remaining = charge["amount"] - state.live_refunded(charge_id)
    if remaining <= 0:
        raise StripeError(
            400,
            f"Charge {charge_id} has already been refunded.",
            code="charge_already_refunded",
            param="charge",
        )
    if amount is None:
        amount = remaining
    if amount > remaining:
        raise StripeError(
            400,
            f"Refund amount ({_money(amount)}) is greater than unrefunded amount on charge "
            f"({_money(remaining)})",
            code="amount_too_large",
            param="amount",
        )
    previous = {"amount_refunded": charge["amount_refunded"], "refunded": charge["refunded"]}
    refund = objects.refund(
        charge=charge,
        amount=amount,
        reason=reason,
        metadata=metadata,
        created=state.clock.now_int(),
    )
    state.refund_added(refund)
    refund_book(state, refund)
    state.sync_charge_refunds(charge)
    state.emit("refund.created", refund, ctx)
    state.emit("charge.refunded", charge, ctx, previous)
    return 200, _expand(state, state.render(refund), params)


def refund_update(
    state: State, ctx: RequestContext, data: dict[str, Any], refund_id: str
) -> Result:
    params = Params(data)
    refund = _get(state, state.world.refunds, "refund", refund_id)
    previous = {"metadata": dict(refund["metadata"])}
    refund["metadata"] = merge_metadata(refund["metadata"], params.metadata())
    if refund["metadata"] != previous["metadata"]:
        state.emit("refund.updated", refund, ctx, previous)
    return 200, state.render(refund)


def refund_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data)
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    timeline = state.world.timelines["refund"]
    keys = None
    if charge_id is not None:
        keys = timeline.keys_of(state.world.refunds_by_charge.get(charge_id, []))
    elif pi_id is not None:  # a PaymentIntent's refunds are its charges' refunds
        by_charge = state.world.refunds_by_charge
        charge_ids = state.world.charges_by_pi.get(pi_id, [])
        keys = timeline.keys_of(rid for cid in charge_ids for rid in by_charge.get(cid, []))

    def keep(refund: dict[str, Any]) -> bool:
        return pi_id is None or refund["payment_intent"] == pi_id

    return _page(state, "refund", params, "/v1/refunds", keys, keep)


REFUND_TRANSITIONS: dict[str, set[str]] = {
    "pending": {"succeeded", "failed", "canceled", "requires_action"},
    "requires_action": {"pending", "succeeded", "failed", "canceled"},
    "succeeded": {"pending", "requires_action", "failed"},
    "failed": set(),
    "canceled": set(),
}
REFUND_FAILURE_REASONS = {
    "charge_for_pending_refund_disputed", "declined", "expired_or_canceled_card",
    "insufficient_funds", "lost_or_stolen_card", "merchant_request", "unknown",
}  # fmt: skip


def refund_book(state: State, refund: dict[str, Any]) -> None:
    """A refund's balance transaction: type `refund`, the amount taken from the balance. No fee
    comes back: Stripe keeps the charge's processing fee (https://docs.stripe.com/refunds)."""
    txn = balance_transaction_add(
        state,
        amount=-refund["amount"],
        currency=refund["currency"],
        type="refund",
        reporting_category="refund",
        source=refund["id"],
        description="REFUND FOR CHARGE",
        created=refund["created"],
    )
    refund["balance_transaction"] = txn["id"]


def refund_failure_book(state: State, refund: dict[str, Any], created: int | None = None) -> None:
    """A failed refund's `failure_balance_transaction`: type `refund_failure`, the amount back in
    the balance (https://docs.stripe.com/api/refunds/object#refund_object-failure_balance_transaction)."""
    txn = balance_transaction_add(
        state,
        amount=refund["amount"],
        currency=refund["currency"],
        type="refund_failure",
        reporting_category="refund_failure",
        source=refund["id"],
        description="REFUND FAILURE",
        created=created,
    )
    refund["failure_balance_transaction"] = txn["id"]


# Why a refund is pending (SDK `Refund.pending_reason`); `processing` unless the control API says.
REFUND_PENDING_REASONS = {"processing", "insufficient_funds", "charge_pending"}


def refund_status_fields(
    refund: dict[str, Any],
    status: str,
    failure_reason: str | None,
    pending_reason: str | None = None,
) -> None:
    """A refund's status and the fields Stripe shows with it, each only in its status
    (https://docs.stripe.com/api/refunds/object): `pending_reason` while pending, `next_action`
    while it requires action, `failure_reason` (and the failure balance transaction, booked by
    the caller) once failed."""
    refund["status"] = status
    if status == "failed":
        refund["failure_reason"] = failure_reason or "unknown"
    if status == "pending":
        refund["pending_reason"] = pending_reason or "processing"
    else:
        refund.pop("pending_reason", None)
    if status == "requires_action":
        refund["next_action"] = {"type": "display_details", "display_details": None}
    else:
        refund.pop("next_action", None)


def refund_set_status(
    state: State,
    ctx: RequestContext | None,
    refund: dict[str, Any],
    status: str,
    failure_reason: str | None,
    pending_reason: str | None = None,
) -> dict[str, Any]:
    """Move a refund to `status`, as the card network or the merchant would: a failed or canceled
    refund gives its amount back to the charge (a failed one with its failure balance
    transaction). Emits refund.updated (and refund.failed)."""
    if status not in REFUND_TRANSITIONS:
        raise invalid(f"Invalid status: {status}", param="status")
    if status not in REFUND_TRANSITIONS[refund["status"]]:
        raise StripeError(
            400,
            f"A refund cannot move from {refund['status']} to {status}.",
            param="status",
            stored=True,
        )
    previous = {"status": refund["status"]}
    # The reference as shown until now stays; a refund that fails before it came never gets one.
    state.refund_reference_settle(refund)
    refund_status_fields(refund, status, failure_reason, pending_reason)
    state.refund_reference_settle(refund)
    if status in ("failed", "canceled"):  # terminal: it was live until now
        state.refund_released(refund)
    if status == "failed":
        refund_failure_book(state, refund)
        previous["failure_reason"] = None
    charge = state.world.charges.get(refund["charge"])
    if charge is not None:  # None once the charge was forgotten
        state.sync_charge_refunds(charge)
    state.emit("refund.updated", refund, ctx, previous)
    state.emit("charge.refund.updated", refund, ctx, previous)
    if status == "failed":
        state.emit("refund.failed", refund, ctx, previous)
    return refund


def refund_cancel(
    state: State, ctx: RequestContext, data: dict[str, Any], refund_id: str
) -> Result:
    params = Params(data)
    refund = _get(state, state.world.refunds, "refund", refund_id)
    if refund["status"] != "requires_action":
        raise StripeError(
            400,
            "Only a refund with status requires_action can be canceled; "
            f"this one is {refund['status']}.",
        )
    refund_set_status(state, ctx, refund, "canceled", None)
    return 200, _expand(state, state.render(refund), params)
