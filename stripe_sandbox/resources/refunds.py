"""Refunds: create, update, list, and their status as it moves (failed, canceled)."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.ids import new_id
from stripe_sandbox.params import Params, merge_metadata
from stripe_sandbox.resources.common import Result, _expand, _get, _money, _page, retriever
from stripe_sandbox.state import RequestContext, State

refund_retrieve = retriever("refunds", "refund")


_REFUND_CREATE = {
    "charge", "payment_intent", "amount", "reason", "metadata", "instructions_email",
    "refund_application_fee", "reverse_transfer", "currency", "customer", "origin",
}  # fmt: skip
REFUND_REASONS = {"duplicate", "fraudulent", "requested_by_customer"}


def refund_create(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data, _REFUND_CREATE)
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    amount = params.integer("amount", minimum=1)
    reason = params.string("reason", choices=REFUND_REASONS)
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
    if charge["disputed"]:
        raise StripeError(
            400,
            f"Charge {charge_id} has been charged back; cannot issue a refund.",
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
    state.sync_charge_refunds(charge)
    state.emit("refund.created", refund, ctx)
    state.emit("charge.refunded", charge, ctx, previous)
    return 200, _expand(state, state.render(refund), params)


def refund_update(
    state: State, ctx: RequestContext, data: dict[str, Any], refund_id: str
) -> Result:
    params = Params(data, {"metadata"})
    refund = _get(state, state.world.refunds, "refund", refund_id)
    previous = {"metadata": dict(refund["metadata"])}
    refund["metadata"] = merge_metadata(refund["metadata"], params.metadata())
    if refund["metadata"] != previous["metadata"]:
        state.emit("refund.updated", refund, ctx, previous)
    return 200, state.render(refund)


def refund_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(
        data, {"charge", "payment_intent", "created", "limit", "starting_after", "ending_before"}
    )
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


def refund_status_fields(refund: dict[str, Any], status: str, failure_reason: str | None) -> None:
    """A refund's status and the fields Stripe shows with it."""
    refund["status"] = status
    if status == "failed":
        refund["failure_reason"] = failure_reason or "unknown"
        refund["failure_balance_transaction"] = new_id("txn")
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
) -> dict[str, Any]:
    """Move a refund to `status`, as the card network or the merchant would: a failed or canceled
    refund gives its amount back to the charge. Emits refund.updated (and refund.failed)."""
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
    refund_status_fields(refund, status, failure_reason)
    if status in ("failed", "canceled"):  # terminal: it was live until now
        state.refund_released(refund)
    if status == "failed":
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
    Params(data, set())
    refund = _get(state, state.world.refunds, "refund", refund_id)
    if refund["status"] != "requires_action":
        raise StripeError(
            400,
            "Only a refund with status requires_action can be canceled; "
            f"this one is {refund['status']}.",
        )
    refund_set_status(state, ctx, refund, "canceled", None)
    return 200, state.render(refund)
