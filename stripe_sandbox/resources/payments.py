"""PaymentIntents and charges: create, confirm (the test cards' outcomes), search, list."""

from __future__ import annotations

import re
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _expand, _get, _money, _page, retriever
from stripe_sandbox.resources.disputes import dispute_open
from stripe_sandbox.state import RequestContext, State

MIN_CHARGE = 50  # Stripe's minimum for USD, in cents
MAX_CHARGE = 99_999_999


payment_intent_retrieve = retriever(
    "payment_intents", "payment_intent", frozenset({"client_secret"})
)
charge_retrieve = retriever("charges", "charge")


_PI_CREATE = {
    "amount", "currency", "payment_method", "confirm", "metadata", "description",
    "automatic_payment_methods", "payment_method_types", "capture_method", "receipt_email",
    "statement_descriptor", "statement_descriptor_suffix", "return_url", "off_session",
    "customer", "setup_future_usage", "transfer_group", "error_on_requires_action",
    "allowed_payment_method_types",
    "confirmation_method", "payment_method_options", "use_stripe_sdk", "shipping",
}  # fmt: skip


def payment_intent_create(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data, _PI_CREATE)
    amount = params.required_integer("amount", minimum=1, maximum=MAX_CHARGE)
    currency = params.required_string("currency")
    if len(currency) != 3 or not currency.isalpha():
        raise invalid(f"Invalid currency: {currency}", param="currency")
    currency = currency.lower()
    if amount < MIN_CHARGE:
        raise StripeError(
            400,
            f"Amount must be at least {_money(MIN_CHARGE)} {currency}",
            code="amount_too_small",
            param="amount",
            stored=False,
        )
    if (
        params.string("capture_method", choices={"automatic", "automatic_async", "manual"})
        == "manual"
    ):
        raise invalid("The sandbox supports capture_method=automatic only.", param="capture_method")
    payment_method = params.string("payment_method")
    if payment_method is not None and payment_method not in objects.TEST_CARDS:
        raise resource_missing("PaymentMethod", payment_method, param="payment_method")
    types = params.raw("payment_method_types")
    automatic = params.raw("automatic_payment_methods")
    pi = objects.payment_intent(
        amount=amount,
        currency=currency,
        created=state.clock.now_int(),
        payment_method=payment_method,
        metadata=params.metadata() or {},
        description=params.string("description"),
        receipt_email=params.string("receipt_email"),
        payment_method_types=types if isinstance(types, list) else ["card"],
        automatic_payment_methods=isinstance(automatic, dict)
        and automatic.get("enabled") == "true",
    )
    state.store(pi)
    state.emit("payment_intent.created", pi, ctx)
    if params.boolean("confirm", default=False):
        _confirm(state, ctx, pi)
    return 200, _expand(state, state.render(pi), params)


def payment_intent_confirm(
    state: State, ctx: RequestContext, data: dict[str, Any], pi_id: str
) -> Result:
    params = Params(data, {"payment_method", "return_url", "off_session", "receipt_email"})
    pi = _get(state, state.world.payment_intents, "payment_intent", pi_id)
    payment_method = params.string("payment_method")
    if payment_method is not None:
        if payment_method not in objects.TEST_CARDS:
            raise resource_missing("PaymentMethod", payment_method, param="payment_method")
        pi["payment_method"] = payment_method
    _confirm(state, ctx, pi)
    return 200, _expand(state, state.render(pi), params)


def _confirm(state: State, ctx: RequestContext, pi: dict[str, Any]) -> None:
    if pi["status"] not in ("requires_payment_method", "requires_confirmation"):
        raise StripeError(
            400,
            f"This PaymentIntent's status is {pi['status']}; it cannot be confirmed.",
            code="payment_intent_unexpected_state",
            extra={"payment_intent": state.render(pi)},
        )
    if pi["payment_method"] is None:
        raise StripeError(
            400,
            "You cannot confirm this PaymentIntent because it's missing a payment method.",
            code="payment_intent_unexpected_state",
            stored=False,
        )
    card = objects.TEST_CARDS[pi["payment_method"]]
    charge = objects.charge(pi=pi, card=card, created=state.clock.now_int(), base_url=ctx.base_url)
    state.store(charge)
    state.world.charges_by_pi.setdefault(pi["id"], []).append(charge["id"])
    pi["latest_charge"] = charge["id"]
    if card.error_code is not None:
        pi["status"] = "requires_payment_method"
        pi["last_payment_error"] = {
            "charge": charge["id"],
            "code": card.error_code,
            "decline_code": card.decline_code,
            "doc_url": f"https://stripe.com/docs/error-codes/{card.error_code.replace('_', '-')}",
            "message": card.message,
            "payment_method": {
                "id": pi["payment_method"],
                "object": "payment_method",
                "type": "card",
            },
            "type": "card_error",
        }
        state.emit("charge.failed", charge, ctx)
        state.emit("payment_intent.payment_failed", pi, ctx)
        raise StripeError(
            402,
            card.message or "Your card was declined.",
            type="card_error",
            code=card.error_code,
            extra={
                "decline_code": card.decline_code,
                "charge": charge["id"],
                "payment_intent": state.render(pi),
                "payment_method": {"id": pi["payment_method"], "object": "payment_method"},
            },
        )
    pi["status"] = "succeeded"
    pi["amount_received"] = pi["amount"]
    pi["last_payment_error"] = None
    state.emit("charge.succeeded", charge, ctx)
    state.emit("payment_intent.succeeded", pi, ctx)
    if card.disputes:
        dispute_open(state, ctx, charge, reason="fraudulent", amount=charge["amount"])


_SEARCH_CLAUSE = re.compile(
    r"""^\s*metadata\[(['"])(?P<key>[^'"]+)\1\]\s*:\s*(['"])(?P<value>[^'"]*)\3\s*$"""
)


def payment_intent_search(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """Stripe's Search API over PaymentIntents, for the one query form Vouch sends:
    `metadata['key']:'value'` clauses joined by AND. Newest first; `limit` 1-100 (default 10),
    `page` the `next_page` cursor of the page before."""
    params = Params(data, {"query", "limit", "page", "expand"})
    query = params.required_string("query")
    clauses = []
    for part in re.split(r"\s+AND\s+", query):
        match = _SEARCH_CLAUSE.match(part)
        if match is None:
            raise invalid(
                "The sandbox searches by metadata['key']:'value' clauses joined by AND only.",
                param="query",
            )
        clauses.append((match["key"], match["value"]))
    limit = params.integer("limit", minimum=1, maximum=100) or 10
    page = params.string("page")
    start = int(page) if page is not None and page.isdigit() else 0
    hits = [
        pi
        for pi in reversed(state.world.payment_intents.values())
        if state.visible(pi["id"])
        and all((pi.get("metadata") or {}).get(k) == v for k, v in clauses)
    ]
    window = hits[start : start + limit]
    has_more = len(hits) > start + limit
    return 200, {
        "object": "search_result",
        "data": [state.render(pi) for pi in window],
        "has_more": has_more,
        "next_page": str(start + limit) if has_more else None,
        "url": "/v1/payment_intents/search",
    }


def charge_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(
        data,
        {
            "payment_intent",
            "customer",
            "created",
            "limit",
            "starting_after",
            "ending_before",
            "transfer_group",
        },
    )
    pi_id = params.string("payment_intent")
    keys = None
    if pi_id is not None:
        keys = state.world.timelines["charge"].keys_of(state.world.charges_by_pi.get(pi_id, []))
    return _page(state, "charge", params, "/v1/charges", keys)
