"""The sandbox's control API (`/_sandbox/...`, JSON in and out, no API key): what tests and
demos use to move the world in ways Stripe's API cannot (open a dispute, fail a refund, inject a
fault, move the clock). Not part of Stripe."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stripe_sandbox import backstage, objects, resources
from stripe_sandbox.errors import StripeError
from stripe_sandbox.ids import new_id
from stripe_sandbox.state import Fault, WebhookBehaviour

if TYPE_CHECKING:
    from stripe_sandbox.server import Sandbox

FAULT_KINDS = {"server_error", "rate_limit", "timeout", "apply_then_drop", "delay", "refuse"}


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
            return 200, {"reset": True}
        if route == ("GET", "state"):
            return 200, state.summary()
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
            charge_id = _str(body, "charge")
            charge = state.world.charges.get(charge_id)
            if charge is None:
                raise _bad(f"No such charge: {charge_id}")
            if charge["status"] != "succeeded":
                raise _bad(f"Charge {charge_id} did not succeed; it cannot be disputed.")
            if any(
                state.world.disputes[d]["status"] not in objects.DISPUTE_CLOSED
                for d in state.world.disputes_by_charge.get(charge_id, [])
            ):
                raise _bad(f"Charge {charge_id} already has an open dispute.")
            reason = body.get("reason", "general")
            if reason not in objects.DISPUTE_REASONS:
                raise _bad(f"reason must be one of {sorted(objects.DISPUTE_REASONS)}")
            amount = _int(body, "amount", charge["amount"], minimum=1) or charge["amount"]
            if amount > charge["amount"]:
                raise _bad("amount may not exceed the charge's amount")
            if "network_reason_code" in body:
                code = _optional_str(body, "network_reason_code")
                if code is not None and len(code) > 20:
                    raise _bad("network_reason_code must be at most 20 characters")
                dispute = resources.dispute_open(
                    state, None, charge, reason=reason, amount=amount, network_reason_code=code
                )
            else:
                dispute = resources.dispute_open(state, None, charge, reason=reason, amount=amount)
            return 200, state.render(dispute)
        if route == ("POST", "disputes", "{id}", "status"):
            existing = state.world.disputes.get(parts[1])
            if existing is None:
                raise _bad(f"No such dispute: {parts[1]}")
            appeal_eligible = body.get("appeal_eligible", False)
            if not isinstance(appeal_eligible, bool):
                raise _bad("appeal_eligible must be true or false")
            resources.dispute_set_status(
                state, None, existing, _str(body, "status"), appeal_eligible=appeal_eligible
            )
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
            resources.refund_set_status(state, None, refund, status, failure_reason)
            return 200, state.render(refund)
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
        if route == ("POST", "webhook-behaviour"):
            return 200, _webhook_behaviour(state.world.webhook_behaviour, body)
        if route == ("POST", "forget", "{id}"):
            return 200, backstage.forget(state, parts[1])
        if route == ("POST", "tamper", "{id}"):
            return 200, backstage.tamper(state, parts[1], body)
        if route == ("POST", "seed"):
            return 200, backstage.seed(state, sandbox.base_url, body)
        if route == ("POST", "rate-limit"):
            state.world.rate_limit_per_second = _int(body, "per_second") or 0
            sandbox.limiter.configure(state.world.rate_limit_per_second)
            return 200, {"per_second": state.world.rate_limit_per_second}
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
