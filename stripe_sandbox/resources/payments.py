"""PaymentIntents: create, confirm (the test cards' outcomes, 3-D Secure), cancel, list and
search. Which parameters each takes, with
their types and enums, is checked before the handler against the pinned SDK (contract_checks)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NoReturn

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.ids import new_id
from stripe_sandbox.params import Params
from stripe_sandbox.resources.charges import charge_book
from stripe_sandbox.resources.common import Result, _expand, _get, _money, _page, retriever
from stripe_sandbox.resources.disputes import dispute_open
from stripe_sandbox.state import RequestContext, State

MIN_CHARGE = 50  # Stripe's minimum for USD, in cents
MAX_CHARGE = 99_999_999
# The payment methods the sandbox's account has turned on in its (imaginary) Dashboard: cards
# only. Dynamic payment methods and `allowed_payment_method_types` both come down to these
# (https://docs.stripe.com/payments/payment-methods/dynamic-payment-methods).
ACCOUNT_PAYMENT_METHODS = ("card",)
# https://docs.stripe.com/api/payment_intents/cancel
CANCELABLE = ("requires_payment_method", "requires_capture", "requires_confirmation",
              "requires_action", "processing")  # fmt: skip
_DYNAMIC = "https://docs.stripe.com/changelog/2023-08-16/automatic-payment-methods"

payment_intent_retrieve = retriever("payment_intents", "payment_intent")


# --- which payment methods ------------------------------------------------------------------


def _payment_methods(params: Params) -> dict[str, Any]:
    """The PaymentIntent's payment-method fields from the request: `allowed_payment_method_types`
    (exclusive of the other ways, https://docs.stripe.com/changelog/dahlia/2026-07-29/
    allowed-payment-method-types-parameter), else dynamic payment methods, on by default
    (https://docs.stripe.com/changelog/2023-08-16/automatic-payment-methods)."""
    allowed = params.raw("allowed_payment_method_types")
    excluded = params.raw("excluded_payment_method_types")
    if allowed is not None:
        for other in (
            "excluded_payment_method_types",
            "automatic_payment_methods",
            "payment_method_configuration",
        ):
            if params.has(other):
                raise StripeError(
                    400,
                    "You may only specify one of these parameters: "
                    f"allowed_payment_method_types, {other}.",
                    code="parameters_exclusive",
                    param="allowed_payment_method_types",
                    stored=False,
                )
        types = _type_list(allowed, "allowed_payment_method_types")
        return {
            "allowed_payment_method_types": types,
            "automatic_payment_methods": None,
            "excluded_payment_method_types": None,
            "payment_method_types": [t for t in types if t in ACCOUNT_PAYMENT_METHODS],
        }
    automatic = params.raw("automatic_payment_methods")
    settings = automatic if isinstance(automatic, dict) else {}
    enabled = settings.get("enabled", "true") != "false"
    excluded_types = (
        _type_list(excluded, "excluded_payment_method_types") if excluded is not None else None
    )
    return {
        "allowed_payment_method_types": None,
        "automatic_payment_methods": {
            "allow_redirects": settings.get("allow_redirects") or "always",
            "enabled": enabled,
        },
        "excluded_payment_method_types": excluded_types,
        "payment_method_types": [
            t for t in ACCOUNT_PAYMENT_METHODS if t not in (excluded_types or [])
        ],
    }


def _type_list(value: Any, param: str) -> list[str]:
    if value == "":
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid(f"Invalid array: {param}", param=param)
    return list(value)


# --- confirming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """What a confirmation asks beyond the PaymentIntent itself."""

    return_url: str | None
    off_session: bool
    error_on_requires_action: bool

    @classmethod
    def of(cls, params: Params) -> Attempt:
        off_session = params.raw("off_session")
        return cls(
            return_url=params.string("return_url"),
            off_session=off_session in ("true", "one_off", "recurring"),
            error_on_requires_action=params.boolean("error_on_requires_action", default=False),
        )

    def check(self, automatic: dict[str, Any] | None) -> None:
        """Refuse, before anything happens, what Stripe refuses of a confirmation with dynamic
        payment methods (https://docs.stripe.com/changelog/2023-08-16/automatic-payment-methods):
        no `error_on_requires_action`, and a `return_url` unless `off_session` or
        `allow_redirects=never`."""
        if automatic is None or not automatic["enabled"]:
            return
        if self.error_on_requires_action:
            raise invalid(
                "`error_on_requires_action` cannot be used with `automatic_payment_methods`. "
                "Use `allowed_payment_method_types` to fail payment attempts that require "
                f"action ({_DYNAMIC}).",
                param="error_on_requires_action",
            )
        redirects = automatic["allow_redirects"] != "never"
        if self.return_url is None and not self.off_session and redirects:
            raise invalid(
                "A `return_url` must be specified because this Payment Intent is configured "
                "to automatically accept the payment methods enabled in the Dashboard, some "
                "of which may require a full page redirect to succeed. If you do not want to "
                "accept redirect-based payment methods, set "
                "`automatic_payment_methods[enabled]` to `true` and "
                "`automatic_payment_methods[allow_redirects]` to `never` when creating Setup "
                "Intents and Payment Intents."
            )


def payment_intent_create(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data)
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
    if params.string("capture_method") == "manual":
        raise invalid("The sandbox supports capture_method=automatic only.", param="capture_method")
    payment_method = params.string("payment_method")
    if payment_method is not None and payment_method not in objects.TEST_CARDS:
        raise resource_missing("PaymentMethod", payment_method, param="payment_method")
    methods = _payment_methods(params)
    confirm = params.boolean("confirm", default=False)
    attempt = Attempt.of(params)
    if confirm:
        attempt.check(methods["automatic_payment_methods"])
    pi = objects.payment_intent(
        amount=amount,
        currency=currency,
        created=state.clock.now_int(),
        payment_method=payment_method,
        metadata=params.metadata() or {},
        description=params.string("description"),
        receipt_email=params.string("receipt_email"),
        payment_method_types=methods["payment_method_types"],
        allowed_payment_method_types=methods["allowed_payment_method_types"],
        automatic_payment_methods=methods["automatic_payment_methods"],
    )
    pi["excluded_payment_method_types"] = methods["excluded_payment_method_types"]
    state.store(pi)
    state.emit("payment_intent.created", pi, ctx)
    if confirm:
        _confirm(state, ctx, pi, attempt)
    return 200, _expand(state, state.render(pi), params)


def payment_intent_confirm(
    state: State, ctx: RequestContext, data: dict[str, Any], pi_id: str
) -> Result:
    params = Params(data)
    pi = _get(state, state.world.payment_intents, "payment_intent", pi_id)
    payment_method = params.string("payment_method")
    if payment_method is not None and payment_method not in objects.TEST_CARDS:
        raise resource_missing("PaymentMethod", payment_method, param="payment_method")
    changes: dict[str, Any] = {}
    if params.has("allowed_payment_method_types"):
        changes = _payment_methods(params)
    elif params.has("excluded_payment_method_types"):  # narrows the dynamic payment methods
        excluded = _payment_methods(params)
        changes = {name: excluded[name] for name in ("excluded_payment_method_types",
                                                     "payment_method_types")}  # fmt: skip
    attempt = Attempt.of(params)
    attempt.check({**pi, **changes}["automatic_payment_methods"])
    pi.update(changes)
    if payment_method is not None:
        pi["payment_method"] = payment_method
    _confirm(state, ctx, pi, attempt)
    return 200, _expand(state, state.render(pi), params)


def _unexpected_state(state: State, pi: dict[str, Any], message: str) -> StripeError:
    return StripeError(
        400,
        message,
        code="payment_intent_unexpected_state",
        extra={"payment_intent": state.render(pi)},
    )


def _confirm(state: State, ctx: RequestContext, pi: dict[str, Any], attempt: Attempt) -> None:
    if pi["status"] not in ("requires_payment_method", "requires_confirmation"):
        raise _unexpected_state(
            state, pi, f"This PaymentIntent's status is {pi['status']}; it cannot be confirmed."
        )
    if pi["payment_method"] is None:
        raise StripeError(
            400,
            "You cannot confirm this PaymentIntent because it's missing a payment method.",
            code="payment_intent_unexpected_state",
            stored=False,
        )
    card = objects.TEST_CARDS[pi["payment_method"]]
    if card.authentication and attempt.error_on_requires_action:
        # https://docs.stripe.com/error-codes#authentication-required
        _decline(
            state,
            ctx,
            pi,
            card,
            error_code="authentication_required",
            decline_code="authentication_required",
            message="Your card was declined. This transaction requires authentication.",
        )
    if card.authentication:
        _require_action(state, ctx, pi, card, attempt.return_url)
        return
    if card.error_code is not None:
        _decline(state, ctx, pi, card)
    payment_intent_succeed(state, ctx, pi, base_url=ctx.base_url)


def _require_action(
    state: State,
    ctx: RequestContext,
    pi: dict[str, Any],
    card: objects.TestCard,
    return_url: str | None,
) -> None:
    """The issuer asks for 3-D Secure: the PaymentIntent waits for the customer, with the
    `next_action` Stripe gives a server-side confirmation, `use_stripe_sdk` (Stripe.js handles it)
    or, with a `return_url`, `redirect_to_url` (https://docs.stripe.com/payments/3d-secure/
    authentication-flow#manual-redirect). No charge is made until authentication succeeds."""
    source = new_id("payatt")
    if return_url is None:
        pi["next_action"] = {
            "type": "use_stripe_sdk",
            "use_stripe_sdk": {
                "type": "stripe_3ds2_fingerprint",
                "directory_server_name": card.brand,
                "server_transaction_id": new_id("3ds")[4:],
                "three_d_secure_2_source": source,
            },
        }
    else:
        pi["next_action"] = {
            "type": "redirect_to_url",
            "redirect_to_url": {
                "return_url": return_url,
                "url": "https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_sandbox"
                f"&payment_intent={pi['id']}&payment_intent_client_secret={pi['client_secret']}"
                f"&publishable_key=pk_test_sandbox&source={source}",
            },
        }
    pi["status"] = "requires_action"
    pi["last_payment_error"] = None
    state.emit("payment_intent.requires_action", pi, ctx)


def _decline(
    state: State,
    ctx: RequestContext,
    pi: dict[str, Any],
    card: objects.TestCard,
    **decline: str,
) -> NoReturn:
    """The attempt fails: a failed charge, the PaymentIntent back to `requires_payment_method`
    with `last_payment_error`, and Stripe's 402 card_error (raised)."""
    charge = objects.charge(
        pi=pi, card=card, created=state.clock.now_int(), base_url=ctx.base_url, **decline
    )
    state.store(charge)
    state.world.charges_by_pi.setdefault(pi["id"], []).append(charge["id"])
    code, decline_code = charge["failure_code"], charge["outcome"]["reason"]
    message = charge["failure_message"] or "Your card was declined."
    method = objects.payment_method(pi["payment_method"], card, pi["created"])
    pi["latest_charge"] = charge["id"]
    pi["status"] = "requires_payment_method"
    pi["next_action"] = None
    pi["last_payment_error"] = {
        "charge": charge["id"],
        "code": code,
        "decline_code": decline_code,
        "doc_url": f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}",
        "message": message,
        "payment_method": method,
        "type": "card_error",
    }
    state.emit("charge.failed", charge, ctx)
    state.emit("payment_intent.payment_failed", pi, ctx)
    raise StripeError(
        402,
        message,
        type="card_error",
        code=code,
        extra={
            "decline_code": decline_code,
            "charge": charge["id"],
            "payment_intent": state.render(pi),
            "payment_method": method,
        },
    )


def payment_intent_succeed(
    state: State,
    ctx: RequestContext | None,
    pi: dict[str, Any],
    *,
    base_url: str,
    three_d_secure: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The card is charged: a succeeded charge with its balance transaction (Stripe's fee), the
    PaymentIntent `succeeded`. Answers the charge."""
    card = objects.TEST_CARDS[pi["payment_method"]]
    charge = objects.charge(pi=pi, card=card, created=state.clock.now_int(), base_url=base_url)
    charge["payment_method_details"]["card"]["three_d_secure"] = three_d_secure
    state.store(charge)
    charge_book(state, charge)
    state.world.charges_by_pi.setdefault(pi["id"], []).append(charge["id"])
    pi["latest_charge"] = charge["id"]
    pi["status"] = "succeeded"
    pi["amount_received"] = pi["amount"]
    pi["last_payment_error"] = None
    pi["next_action"] = None
    state.emit("charge.succeeded", charge, ctx)
    state.emit("payment_intent.succeeded", pi, ctx)
    if card.disputes:
        dispute_open(state, ctx, charge, reason="fraudulent", amount=charge["amount"])
    return charge


def payment_intent_authenticate(
    state: State, pi: dict[str, Any], outcome: str, *, base_url: str
) -> dict[str, Any]:
    """The customer completing (`succeed`) or failing (`fail`) the 3-D Secure challenge of a
    PaymentIntent in `requires_action` (https://docs.stripe.com/payments/paymentintents/lifecycle):
    it succeeds with an authenticated charge, or returns to `requires_payment_method` with
    `payment_intent_authentication_failure` and no charge."""
    if pi["status"] != "requires_action":
        raise StripeError(
            400, f"PaymentIntent {pi['id']} is {pi['status']}; nothing waits for authentication."
        )
    if outcome == "succeed":
        three_d_secure = objects.three_d_secure_authenticated()
        payment_intent_succeed(state, None, pi, base_url=base_url, three_d_secure=three_d_secure)
        return pi
    pi["status"] = "requires_payment_method"
    pi["next_action"] = None
    pi["last_payment_error"] = {
        "code": "payment_intent_authentication_failure",
        "doc_url": "https://stripe.com/docs/error-codes/payment-intent-authentication-failure",
        "message": "The provided PaymentMethod has failed authentication. You can provide "
        "payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent "
        "again.",
        "payment_method": objects.payment_method(
            pi["payment_method"], objects.TEST_CARDS[pi["payment_method"]], pi["created"]
        ),
        "type": "invalid_request_error",
    }
    state.emit("payment_intent.payment_failed", pi, None)
    return pi


def payment_intent_cancel(
    state: State, ctx: RequestContext, data: dict[str, Any], pi_id: str
) -> Result:
    """https://docs.stripe.com/api/payment_intents/cancel: from the statuses in CANCELABLE."""
    params = Params(data)
    pi = _get(state, state.world.payment_intents, "payment_intent", pi_id)
    if pi["status"] not in CANCELABLE:
        raise _unexpected_state(
            state,
            pi,
            f"You cannot cancel this PaymentIntent because it has a status of {pi['status']}. "
            f"Only a PaymentIntent with one of the following statuses may be canceled: "
            f"{', '.join(CANCELABLE)}.",
        )
    pi["status"] = "canceled"
    pi["canceled_at"] = state.clock.now_int()
    pi["cancellation_reason"] = params.string("cancellation_reason")
    pi["next_action"] = None
    state.emit("payment_intent.canceled", pi, ctx)
    return 200, _expand(state, state.render(pi), params)


def payment_intent_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """https://docs.stripe.com/api/payment_intents/list: newest first, `created` and cursors;
    `customer`/`customer_account` match nothing (the sandbox has no customers)."""
    params = Params(data)
    nobody = params.has("customer") or params.has("customer_account")
    return _page(
        state, "payment_intent", params, "/v1/payment_intents", None, lambda pi: not nobody
    )


_SEARCH_CLAUSE = re.compile(
    r"""^\s*metadata\[(['"])(?P<key>[^'"]+)\1\]\s*:\s*(['"])(?P<value>[^'"]*)\3\s*$"""
)


def payment_intent_search(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """Stripe's Search API over PaymentIntents, for the one query form Vouch sends:
    `metadata['key']:'value'` clauses joined by AND. Newest first; `limit` 1-100 (default 10),
    `page` the `next_page` cursor of the page before."""
    params = Params(data)
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
