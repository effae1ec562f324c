"""Stripe's API, the subset Vouch uses. Each handler runs under the state lock, reads its
parameters with Stripe's checks, applies the effect, emits Stripe's events and answers with the
object (or raises a StripeError)."""

from __future__ import annotations

import fnmatch
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing, unknown_parameter
from stripe_sandbox.ids import new_id
from stripe_sandbox.params import Params, merge_metadata
from stripe_sandbox.state import RequestContext, State
from stripe_sandbox.timeline import Key

Result = tuple[int, dict[str, Any]]
Handler = Callable[..., Result]

MIN_CHARGE = 50  # Stripe's minimum for USD, in cents
MAX_CHARGE = 99_999_999


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


# --- lists ---------------------------------------------------------------------------------


def _created_range(params: Params) -> tuple[int | None, int | None]:
    """Stripe's `created` filter (exact, or `created[gt|gte|lt|lte]`) as a half-open range of
    seconds [low, high), None for unbounded."""
    value = params.raw("created")
    if value is None:
        return None, None
    if isinstance(value, str):
        exact = params.integer("created")
        return (None, None) if exact is None else (exact, exact + 1)
    if not isinstance(value, dict) or not set(value) <= {"gt", "gte", "lt", "lte"}:
        raise invalid("Invalid created: use created[gt|gte|lt|lte]", param="created")
    bounds = {}
    for op, raw in value.items():
        if not isinstance(raw, str) or not raw.lstrip("-").isdigit():
            raise invalid(f"Invalid integer: {raw}", param=f"created[{op}]")
        bounds[op] = int(raw)
    lows = [bounds["gte"]] if "gte" in bounds else []
    lows += [bounds["gt"] + 1] if "gt" in bounds else []
    highs = [bounds["lt"]] if "lt" in bounds else []
    highs += [bounds["lte"] + 1] if "lte" in bounds else []
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _page(
    state: State,
    kind: str,
    params: Params,
    url: str,
    keys: list[Key] | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Result:
    """Stripe's cursor pagination, newest first: `limit` (1-100, default 10), `starting_after`
    (older than that object), `ending_before` (newer than it), `has_more`, and the `created`
    filter. `keys` are the candidates, oldest first (default: every object of the kind); `keep`
    a further filter. The range is found by bisection and walked from the cursor, so a page costs
    what it shows (plus what `keep` or readback lag skips), not what the account holds."""
    limit = params.integer("limit", minimum=1, maximum=100) or 10
    after = params.string("starting_after")
    before = params.string("ending_before")
    if after and before:
        raise invalid("You may only specify one of starting_after and ending_before.")
    low, high = _created_range(params)
    timeline = state.world.timelines[kind]
    if keys is None:
        keys = timeline.keys()
    start = 0 if low is None else bisect_left(keys, (low,))
    stop = len(keys) if high is None else bisect_left(keys, (high,))
    cursor = after or before
    if cursor is not None:
        cursor_key = timeline.key(cursor)
        if cursor_key is None or not state.visible(cursor):
            param = "starting_after" if after else "ending_before"
            raise resource_missing(kind, cursor, param=param)
        if after:
            stop = min(stop, bisect_left(keys, cursor_key))
        else:
            start = max(start, bisect_right(keys, cursor_key))
    table = state.table(kind)

    def take(positions: range) -> list[dict[str, Any]]:
        taken: list[dict[str, Any]] = []
        for position in positions:
            obj = table.get(keys[position][2])
            if obj is None or not state.visible(obj["id"]) or (keep and not keep(obj)):
                continue
            taken.append(obj)
            if len(taken) > limit:
                break
        return taken

    if before:  # the `limit` objects just newer than the cursor, still shown newest first
        taken = take(range(start, stop))
        page = taken[:limit][::-1]
    else:
        taken = take(range(stop - 1, start - 1, -1))
        page = taken[:limit]
    return 200, {
        "object": "list",
        "data": [state.render(obj) for obj in page],
        "has_more": len(taken) > limit,
        "url": url,
    }


def _get(
    state: State, table: dict[str, dict[str, Any]], kind: str, object_id: str
) -> dict[str, Any]:
    obj = table.get(object_id)
    if obj is None or not state.visible(object_id):
        raise resource_missing(kind, object_id)
    return obj


def _expand(state: State, body: dict[str, Any], params: Params) -> dict[str, Any]:
    """`expand[]=latest_charge` and friends: an id field replaced by its object."""
    tables = {
        "charge": state.world.charges,
        "latest_charge": state.world.charges,
        "payment_intent": state.world.payment_intents,
    }
    for name in params.expand():
        field = name.removeprefix("evidence.")
        if name.startswith("evidence.") and field in objects.EVIDENCE_FILE_FIELDS:
            # A dispute's evidence file (`expand[]=evidence.shipping_documentation`): the File.
            evidence = body.get("evidence")
            if not isinstance(evidence, dict):
                raise invalid(f"This property cannot be expanded ({name}).", param="expand")
            value = evidence.get(field)
            if isinstance(value, str) and value in state.world.files:
                evidence[field] = state.render(state.world.files[value])
            continue
        table = tables.get(name)
        if table is None or name not in body:
            raise invalid(f"This property cannot be expanded ({name}).", param="expand")
        value = body[name]
        if isinstance(value, str) and value in table:
            body[name] = state.render(table[value])
    return body


def retriever(table: str, kind: str, allowed: frozenset[str] = frozenset()) -> Handler:
    """GET /v1/<objects>/{id}: the object as it is now, unless readback lag still hides it."""

    def retrieve(state: State, ctx: RequestContext, data: dict[str, Any], object_id: str) -> Result:
        params = Params(data, set(allowed))
        obj = _get(state, getattr(state.world, table), kind, object_id)
        return 200, _expand(state, state.render(obj), params)

    return retrieve


payment_intent_retrieve = retriever(
    "payment_intents", "payment_intent", frozenset({"client_secret"})
)
charge_retrieve = retriever("charges", "charge")
refund_retrieve = retriever("refunds", "refund")
dispute_retrieve = retriever("disputes", "dispute")
file_retrieve = retriever("files", "file")
event_retrieve = retriever("events", "event")


# --- payment intents and charges ---------------------------------------------------------------

_PI_CREATE = {
    "amount", "currency", "payment_method", "confirm", "metadata", "description",
    "automatic_payment_methods", "payment_method_types", "capture_method", "receipt_email",
    "statement_descriptor", "statement_descriptor_suffix", "return_url", "off_session",
    "customer", "setup_future_usage", "transfer_group", "error_on_requires_action",
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


# --- refunds -------------------------------------------------------------------------------------

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


# --- disputes ------------------------------------------------------------------------------------

DISPUTE_DUE_S = 7 * 24 * 60 * 60


def dispute_open(
    state: State, ctx: RequestContext | None, charge: dict[str, Any], *, reason: str, amount: int
) -> dict[str, Any]:
    now = state.clock.now_int()
    dispute = objects.dispute(
        charge=charge, amount=amount, reason=reason, created=now, due_by=now + DISPUTE_DUE_S
    )
    state.store(dispute)
    state.world.disputes_by_charge.setdefault(charge["id"], []).append(dispute["id"])
    charge["disputed"] = True
    state.emit("charge.dispute.created", dispute, ctx)
    return dispute


def dispute_set_status(
    state: State, ctx: RequestContext | None, dispute: dict[str, Any], status: str
) -> None:
    if status not in objects.DISPUTE_STATUSES:
        raise invalid(f"Invalid status: {status}", param="status")
    if dispute["status"] in objects.DISPUTE_CLOSED:
        raise invalid(
            f"Dispute {dispute['id']} is already closed ({dispute['status']}).", param="status"
        )
    previous = {"status": dispute["status"]}
    dispute["status"] = status
    if status in objects.DISPUTE_CLOSED:
        state.emit("charge.dispute.closed", dispute, ctx, previous)
    else:
        state.emit("charge.dispute.updated", dispute, ctx, previous)


def dispute_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(
        data, {"charge", "payment_intent", "created", "limit", "starting_after", "ending_before"}
    )
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    keys = None
    if charge_id is not None:
        keys = state.world.timelines["dispute"].keys_of(
            state.world.disputes_by_charge.get(charge_id, [])
        )

    def keep(dispute: dict[str, Any]) -> bool:
        return (charge_id is None or dispute["charge"] == charge_id) and (
            pi_id is None or dispute["payment_intent"] == pi_id
        )

    return _page(state, "dispute", params, "/v1/disputes", keys, keep)


MAX_EVIDENCE_CHARS = 150_000


def dispute_update(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    """Stage evidence and metadata; `submit` (Stripe's default: true) sends the evidence to the
    bank, which moves `needs_response` to `under_review`. Evidence cannot change after
    submission."""
    params = Params(data, {"evidence", "metadata", "submit", "intended_submission_method"})
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    evidence = params.raw("evidence")
    submit = params.boolean("submit", default=True)
    metadata = params.metadata()
    method = params.string("intended_submission_method", choices=SUBMISSION_METHODS)
    if evidence is not None and not isinstance(evidence, dict):
        raise invalid("Invalid evidence: must be a hash", param="evidence")
    staged: dict[str, Any] = {}
    for name, value in (evidence or {}).items():
        param = f"evidence[{name}]"
        if name == "enhanced_evidence":
            if not isinstance(value, dict):
                raise invalid("Invalid enhanced_evidence: must be a hash", param=param)
            staged[name] = value
        elif name in objects.EVIDENCE_TEXT_FIELDS:
            if not isinstance(value, str):
                raise invalid(f"Invalid string: {param}", param=param)
            limit = objects.EVIDENCE_TEXT_MAX.get(name, objects.EVIDENCE_TEXT_MAX_DEFAULT)
            if len(value) > limit:
                raise invalid(f"Invalid {param}: must be at most {limit} characters", param=param)
            staged[name] = value or None
        elif name in objects.EVIDENCE_FILE_FIELDS:
            if not isinstance(value, str):
                raise invalid(f"Invalid string: {param}", param=param)
            if value and value not in state.world.files:
                raise resource_missing("file", value, param=param)
            staged[name] = value or None
        else:
            raise unknown_parameter(param)
    text_total = sum(
        len(v)
        for k, v in {**dispute["evidence"], **staged}.items()
        if k in objects.EVIDENCE_TEXT_FIELDS and v
    )
    if text_total > MAX_EVIDENCE_CHARS:
        raise invalid(
            f"Evidence text may total at most {MAX_EVIDENCE_CHARS} characters.", param="evidence"
        )
    if (staged or submit) and dispute["status"] not in objects.DISPUTE_RESPONDABLE:
        if dispute["status"] in objects.DISPUTE_CLOSED:
            message = f"This dispute is already closed ({dispute['status']})."
        else:
            message = (
                "This dispute's evidence has already been submitted; "
                "it cannot be updated or submitted again."
            )
        raise StripeError(400, message, param="submit" if submit and not staged else "evidence")
    previous: dict[str, Any] = {}
    if method is not None and method != dispute["intended_submission_method"]:
        previous["intended_submission_method"] = dispute["intended_submission_method"]
        dispute["intended_submission_method"] = method
    if staged:
        previous["evidence"] = {k: dispute["evidence"].get(k) for k in staged}
        dispute["evidence"].update(staged)
        details = dispute["evidence_details"]
        details["has_evidence"] = any(
            v for k, v in dispute["evidence"].items() if k != "enhanced_evidence"
        )
    if metadata is not None:
        merged = merge_metadata(dispute["metadata"], metadata)
        if merged != dispute["metadata"]:
            previous["metadata"] = dict(dispute["metadata"])
            dispute["metadata"] = merged
    if submit:
        _submit(dispute, previous, method="manual")
    if previous:
        state.emit("charge.dispute.updated", dispute, ctx, previous)
    return 200, state.render(dispute)


SUBMISSION_METHODS = {"manual", "prefer_manual", "prefer_smart_disputes", "smart_disputes"}


def _submit(dispute: dict[str, Any], previous: dict[str, Any], *, method: str) -> None:
    details = dispute["evidence_details"]
    previous["status"] = dispute["status"]
    previous["evidence_details"] = {
        "submission_count": details["submission_count"],
        "submission_method": details["submission_method"],
    }
    dispute["status"] = (
        "under_review" if dispute["status"] == "needs_response" else "warning_under_review"
    )
    details["submission_count"] += 1
    details["submission_method"] = method


def dispute_smart_submit(state: State, ctx: RequestContext | None, dispute: dict[str, Any]) -> None:
    """Stripe's Smart Disputes submitting on the account's behalf: refused when the dispute says
    `intended_submission_method=manual`, or when it is no longer open for a response."""
    if dispute["intended_submission_method"] == "manual":
        raise invalid(
            f"Dispute {dispute['id']} is to be submitted manually; Smart Disputes may not submit.",
            param="intended_submission_method",
        )
    if dispute["status"] not in objects.DISPUTE_RESPONDABLE:
        raise invalid(f"Dispute {dispute['id']} cannot be submitted ({dispute['status']}).")
    previous: dict[str, Any] = {}
    dispute["evidence"]["uncategorized_text"] = "Submitted by Smart Disputes."
    dispute["evidence_details"]["has_evidence"] = True
    _submit(dispute, previous, method="smart_disputes")
    state.emit("charge.dispute.updated", dispute, ctx, previous)


def dispute_close(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    Params(data, set())
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    if dispute["status"] not in objects.DISPUTE_RESPONDABLE | {
        "under_review",
        "warning_under_review",
    }:
        raise StripeError(400, f"This dispute is already closed ({dispute['status']}).")
    closed = "warning_closed" if dispute["status"].startswith("warning") else "lost"
    dispute_set_status(state, ctx, dispute, closed)
    return 200, state.render(dispute)


# --- files -------------------------------------------------------------------------------------

FILE_PURPOSES = {
    "account_requirement", "additional_verification", "business_icon", "business_logo",
    "customer_signature", "dispute_evidence", "identity_document", "issuing_regulatory_reporting",
    "pci_document", "platform_terms_of_service", "tax_document_user_upload",
    "terminal_android_apk", "terminal_reader_splashscreen",
}  # fmt: skip
FILE_TYPES = {
    "pdf": "pdf",
    "png": "png",
    "jpg": "jpg",
    "jpeg": "jpg",
    "gif": "gif",
    "csv": "csv",
    "txt": "txt",
}
DISPUTE_FILE_TYPES = {"pdf", "png", "jpg"}
MAX_FILE_BYTES = 5 * 1024 * 1024


def file_create(
    state: State, ctx: RequestContext, fields: dict[str, str], uploads: dict[str, tuple[str, bytes]]
) -> Result:
    for name in fields:
        if name not in {"purpose", "file_link_data", "expand"} and not name.startswith(
            "file_link_data["
        ):
            raise unknown_parameter(name)
    purpose = fields.get("purpose")
    if not purpose:
        raise invalid("Missing required param: purpose.", param="purpose", code="parameter_missing")
    if purpose not in FILE_PURPOSES:
        raise invalid(
            f"Invalid purpose: {purpose}", param="purpose", code="parameter_invalid_string"
        )
    if "file" not in uploads:
        raise invalid("Missing required param: file.", param="file", code="parameter_missing")
    filename, content = uploads["file"]
    extension = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    file_type = FILE_TYPES.get(extension)
    if file_type is None or (purpose == "dispute_evidence" and file_type not in DISPUTE_FILE_TYPES):
        raise invalid(
            f"Invalid file type for purpose {purpose}: {filename!r} (use PDF, PNG or JPEG).",
            param="file",
        )
    if len(content) > MAX_FILE_BYTES:
        raise invalid(
            f"The file may be at most {MAX_FILE_BYTES} bytes.", param="file", code="file_too_large"
        )
    file_obj = objects.file(
        purpose=purpose,
        filename=filename,
        size=len(content),
        file_type=file_type,
        created=state.clock.now_int(),
        base_url=ctx.base_url,
    )
    state.store(file_obj)
    state.world.file_contents[file_obj["id"]] = content
    return 200, state.render(file_obj)


def file_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data, {"purpose", "created", "limit", "starting_after", "ending_before"})
    purpose = params.string("purpose")
    return _page(
        state,
        "file",
        params,
        "/v1/files",
        keep=None if purpose is None else lambda f: f["purpose"] == purpose,
    )


# --- events --------------------------------------------------------------------------------------


def event_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(
        data,
        {
            "type",
            "types",
            "created",
            "limit",
            "starting_after",
            "ending_before",
            "delivery_success",
        },
    )
    event_type = params.string("type")
    types = params.raw("types")
    if types is not None and (
        not isinstance(types, list) or not all(isinstance(t, str) for t in types)
    ):
        raise invalid("Invalid types: must be an array of strings", param="types")
    if event_type is not None and types is not None:
        raise invalid("You may specify either type or types, not both.", param="types")
    patterns = [event_type] if event_type else (types or [])
    exact = {p for p in patterns if not _WILDCARD.search(p)}
    wildcards = [p for p in patterns if _WILDCARD.search(p)]

    def keep(event: dict[str, Any]) -> bool:
        return event["type"] in exact or any(
            fnmatch.fnmatchcase(event["type"], p) for p in wildcards
        )

    return _page(state, "event", params, "/v1/events", keep=keep if patterns else None)


_WILDCARD = re.compile(r"[*?\[]")
