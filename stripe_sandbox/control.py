"""The sandbox's control API (`/_sandbox/...`, JSON in and out, no API key): what tests and
demos use to move the world in ways Stripe's API cannot (open a dispute, fail a refund, inject a
fault, move the clock). Not part of Stripe."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stripe_sandbox import backstage, objects, resources
from stripe_sandbox.errors import StripeError
from stripe_sandbox.ids import new_id
from stripe_sandbox.state import Fault, State, WebhookBehaviour

if TYPE_CHECKING:
    from stripe_sandbox.server import Sandbox

# Before the endpoint begins (nothing runs, nothing is stored under the key): server_error,
# rate_limit, timeout, refuse. After it began (the answer is stored under the key and replayed):
# apply_then_drop (runs, the answer is lost), apply_then_error (runs, answers a 500),
# error_after_begin (a 500 with nothing applied). delay holds the request, then runs it.
FAULT_KINDS = {
    "server_error",
    "rate_limit",
    "timeout",
    "refuse",
    "delay",
    "apply_then_drop",
    "apply_then_error",
    "error_after_begin",
}


def _bad(message: str) -> StripeError:
    return StripeError(400, message, type="sandbox_error", stored=False)


def _int(
    body: dict[str, Any], name: str, default: int | None = None, minimum: int = 0
) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(f"{name} must be an integer >= {minimum}")
    return value


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise _bad(f"{name} must be a number between 0 and 1")
    return float(value)


def _str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise _bad(f"{name} is required (a string)")
    return value


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    return None if body.get(name) is None else _str(body, name)


# What `status` a new dispute may be opened in, and the case it makes.
OPENING_STATUSES = {"needs_response": None, "warning_needs_response": "inquiry"}


def _dispute_open(state: State, body: dict[str, Any]) -> dict[str, Any]:
    """POST /_sandbox/disputes: a dispute on a succeeded charge that has none (a charge has at
    most one: Charge.dispute names one, https://docs.stripe.com/changelog/2017-02-14/
    charges-specify-dispute-associated-transaction), as an inquiry (`case_type: inquiry` or
    `status: warning_needs_response`), a chargeback or a compliance case; `response_allowed:
    false` for one the bank allows no response to (`due_by: 0`)."""
    charge_id = _str(body, "charge")
    charge = state.world.charges.get(charge_id)
    if charge is None:
        raise _bad(f"No such charge: {charge_id}")
    if charge["status"] != "succeeded":
        raise _bad(f"Charge {charge_id} did not succeed; it cannot be disputed.")
    if state.world.disputes_by_charge.get(charge_id):
        raise _bad(f"Charge {charge_id} already has a dispute; a charge has at most one.")
    reason = body.get("reason", "general")
    if reason not in objects.DISPUTE_REASONS:
        raise _bad(f"reason must be one of {sorted(objects.DISPUTE_REASONS)}")
    amount = _int(body, "amount", charge["amount"], minimum=1) or charge["amount"]
    if amount > charge["amount"]:
        raise _bad("amount may not exceed the charge's amount")
    case_type = _optional_str(body, "case_type")
    if case_type is not None and case_type not in objects.CASE_TYPES:
        raise _bad(f"case_type must be one of {sorted(objects.CASE_TYPES)}")
    status = _optional_str(body, "status")
    if status is not None:
        if status not in OPENING_STATUSES:
            raise _bad(f"status must be one of {sorted(OPENING_STATUSES)}")
        implied = OPENING_STATUSES[status]
        if case_type is not None and (case_type == "inquiry") != (implied == "inquiry"):
            raise _bad(f"status {status} does not open a case of type {case_type}")
        case_type = case_type or implied
    brand = charge["payment_method_details"]["card"]["brand"]
    if case_type == "compliance" and objects.default_case_type(brand, reason) != "compliance":
        raise _bad("case_type compliance is a Visa or Mastercard dispute with reason noncompliant")
    response_allowed = body.get("response_allowed", True)
    if not isinstance(response_allowed, bool):
        raise _bad("response_allowed must be true or false")
    options: dict[str, Any] = {"case_type": case_type, "response_allowed": response_allowed}
    if "network_reason_code" in body:
        code = _optional_str(body, "network_reason_code")
        if code is not None and len(code) > 20:
            raise _bad("network_reason_code must be at most 20 characters")
        options["network_reason_code"] = code
    return resources.dispute_open(state, None, charge, reason=reason, amount=amount, **options)


def handle(
    sandbox: Sandbox, method: str, parts: list[str], body: dict[str, Any]
) -> tuple[int, Any]:
    """Dispatch `/_sandbox/<parts...>`."""
    state = sandbox.state
    route: tuple[str, ...] = ()
    if len(parts) == 1:
        route = (method, parts[0])
    elif len(parts) == 2:
        route = (method, parts[0], "{id}")
    elif len(parts) == 3:
        route = (method, parts[0], "{id}", parts[2])
    with state.lock:
        if route == ("POST", "reset"):
            seed = _int(body, "seed")
            state.reset(seed)
            sandbox.dispatcher.reset()
            sandbox.limits.reset()  # counters and buckets; the configuration stays
            if sandbox.persistence is not None:
                sandbox.persistence.save()  # at once: a restart never brings the old world back
            return 200, {"reset": True}
        if route == ("GET", "state"):
            return 200, {**state.summary(), "rate_limits": sandbox.limits.summary(served=False)}
        if route == ("POST", "webhooks"):
            url, secret = _str(body, "url"), _str(body, "secret")
            endpoint = sandbox.dispatcher.add_endpoint(
                url,
                secret,
                max_attempts=_int(body, "max_attempts", 5, minimum=1) or 5,
                backoff_ms=_int(body, "backoff_ms", 500) or 0,
            )
            return 200, endpoint.describe()
        if route == ("GET", "webhooks"):
            return 200, sandbox.dispatcher.describe()
        if route == ("DELETE", "webhooks"):
            sandbox.dispatcher.remove_endpoints(keep_permanent=False)
            return 200, sandbox.dispatcher.describe()
        if route == ("POST", "disputes"):
            return 200, state.render(_dispute_open(state, body))
        if route == ("POST", "disputes", "{id}", "status"):
            existing = state.world.disputes.get(parts[1])
            if existing is None:
                raise _bad(f"No such dispute: {parts[1]}")
            status = _str(body, "status")
            # Accepted from older callers; Stripe shows no eligibility field, so the appeal is
            # what POST /_sandbox/disputes/{id}/appeal opens.
            appeal_eligible = body.get("appeal_eligible", False)
            if not isinstance(appeal_eligible, bool):
                raise _bad("appeal_eligible must be true or false")
            if appeal_eligible and status != "lost":
                raise _bad("appeal_eligible may only come with status lost")
            resources.dispute_set_status(state, None, existing, status)
            return 200, state.render(existing)
        if route == ("POST", "disputes", "{id}", "appeal"):
            existing = state.world.disputes.get(parts[1])
            if existing is None:
                raise _bad(f"No such dispute: {parts[1]}")
            resources.appeal_open(state, None, existing)
            return 200, state.render(existing)
        if route == ("POST", "disputes", "{id}", "smart-submit"):
            existing = state.world.disputes.get(parts[1])
            if existing is None:
                raise _bad(f"No such dispute: {parts[1]}")
            try:
                resources.dispute_smart_submit(state, None, existing)
            except StripeError as exc:
                raise _bad(exc.message) from exc
            return 200, state.render(existing)
        if route == ("POST", "refunds", "{id}", "status"):
            refund = state.world.refunds.get(parts[1])
            if refund is None:
                raise _bad(f"No such refund: {parts[1]}")
            status = _str(body, "status")
            failure_reason = _optional_str(body, "failure_reason")
            if (
                failure_reason is not None
                and failure_reason not in resources.REFUND_FAILURE_REASONS
            ):
                raise _bad(
                    f"failure_reason must be one of {sorted(resources.REFUND_FAILURE_REASONS)}"
                )
            pending_reason = _optional_str(body, "pending_reason")
            if pending_reason not in (None, *resources.REFUND_PENDING_REASONS):
                raise _bad(
                    f"pending_reason must be one of {sorted(resources.REFUND_PENDING_REASONS)}"
                )
            resources.refund_set_status(state, None, refund, status, failure_reason, pending_reason)
            return 200, state.render(refund)
        if route == ("POST", "payment_intents", "{id}", "authenticate"):
            # The customer completing or failing 3-D Secure (resources.payment_intent_authenticate).
            pi = state.world.payment_intents.get(parts[1])
            if pi is None:
                raise _bad(f"No such PaymentIntent: {parts[1]}")
            outcome = _str(body, "outcome")
            if outcome not in ("succeed", "fail"):
                raise _bad("outcome must be succeed or fail")
            try:
                resources.payment_intent_authenticate(state, pi, outcome, base_url=sandbox.base_url)
            except StripeError as exc:
                raise _bad(exc.message) from exc
            return 200, state.render(pi)
        if route == ("POST", "faults"):
            fault = _fault(body)
            state.world.faults.append(fault)
            return 200, fault.describe()
        if route == ("GET", "faults"):
            return 200, {"faults": [f.describe() for f in state.world.faults]}
        if route == ("DELETE", "faults"):
            state.world.faults.clear()
            return 200, {"faults": []}
        if route == ("POST", "readback-lag"):
            state.world.readback_lag_ms = _int(body, "ms") or 0
            return 200, {"readback_lag_ms": state.world.readback_lag_ms}
        if route == ("POST", "reference-delay"):
            # How long after a card refund succeeds its ARN appears (0: at once).
            state.world.reference_delay_ms = _int(body, "ms") or 0
            return 200, {"reference_delay_ms": state.world.reference_delay_ms}
        if route == ("POST", "webhook-behaviour"):
            return 200, _webhook_behaviour(state.world.webhook_behaviour, body)
        if route == ("POST", "forget", "{id}"):
            return 200, backstage.forget(state, parts[1])
        if route == ("POST", "tamper", "{id}"):
            return 200, backstage.tamper(state, parts[1], body)
        if route == ("POST", "seed"):
            return 200, backstage.seed(state, sandbox.base_url, body)
        if route == ("POST", "rate-limits"):
            try:
                sandbox.limits.configure(body)
            except ValueError as exc:
                raise _bad(str(exc)) from exc
            return 200, sandbox.limits.summary()
        if route == ("GET", "rate-limits"):
            return 200, sandbox.limits.summary()
        if route == ("POST", "clock"):
            advance = body.get("advance_s", 0)
            if isinstance(advance, bool) or not isinstance(advance, int | float) or advance < 0:
                raise _bad("advance_s must be a number >= 0 (the clock only moves forward)")
            state.clock.advance(float(advance))
            return 200, {"now": state.clock.now(), "offset_s": state.clock.offset}
        if route == ("GET", "clock"):
            return 200, {"now": state.clock.now(), "offset_s": state.clock.offset}
    raise StripeError(
        404, f"No control route {method} /_sandbox/{'/'.join(parts)}", type="sandbox_error"
    )


WEBHOOK_BEHAVIOUR_FIELDS = {"duplicate_probability", "reorder", "delay_ms", "drop_probability"}


def _webhook_behaviour(behaviour: WebhookBehaviour, body: dict[str, Any]) -> dict[str, Any]:
    """Change the fields given, all checked before any is applied; answer the whole behaviour."""
    unknown = sorted(set(body) - WEBHOOK_BEHAVIOUR_FIELDS)
    if unknown:
        raise _bad(f"unknown webhook behaviour fields {unknown}")
    duplicate = _number(body, "duplicate_probability", behaviour.duplicate_probability)
    drop = _number(body, "drop_probability", behaviour.drop_probability)
    reorder = body.get("reorder", behaviour.reorder)
    if not isinstance(reorder, bool):
        raise _bad("reorder must be true or false")
    delay_ms = _int(body, "delay_ms", behaviour.delay_ms) or 0
    behaviour.duplicate_probability = duplicate
    behaviour.drop_probability = drop
    behaviour.reorder = reorder
    behaviour.delay_ms = delay_ms
    return asdict(behaviour)


def _fault(body: dict[str, Any]) -> Fault:
    kind = _str(body, "kind")
    if kind not in FAULT_KINDS:
        raise _bad(f"kind must be one of {sorted(FAULT_KINDS)}")
    method = (_optional_str(body, "method") or "*").upper()
    path = _str(body, "path")
    should_retry = body.get("should_retry")
    if should_retry is not None and not isinstance(should_retry, bool):
        raise _bad("should_retry must be true, false or absent")
    default_delay = {"timeout": 2000, "delay": 200}.get(kind, 0)
    return Fault(
        id=new_id("flt", 12),
        method=method,
        path=path,
        kind=kind,
        times=_int(body, "times", minimum=1),
        probability=_number(body, "probability", 1.0),
        delay_ms=_int(body, "delay_ms", default_delay) or 0,
        error_code=_optional_str(body, "error_code"),
        should_retry=should_retry,
        retry_after_s=_int(body, "retry_after_s"),
    )
