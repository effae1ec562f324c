"""The sandbox's side of Stripe's contract (SPEC §12.1), read from the pinned SDK by
`stripe_contract`: every route is one of the SDK's operations (checked when the server module is
imported); every request's parameters are checked against that operation's `*Params` type before
its handler runs, and refused as Stripe refuses them; every answer and every event is recorded
against its resource class for the conformance report."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from stripe_contract import RECORDER, Operation, check_params, operation_for
from stripe_sandbox.errors import StripeError
from stripe_sandbox.params import decode_form

if TYPE_CHECKING:
    from stripe_sandbox.state import State

# The adapter names itself with stripe.set_app_info("Vouch", ...): the SDK puts "Vouch/<version>"
# in the User-Agent. Requests of other clients (the tests' own SDK clients) are checked and refused
# the same way, but only the adapter's fail the conformance suite.
ADAPTER_AGENT = "Vouch/"


class RouteWithoutOperation(Exception):
    """A sandbox route that is none of Stripe's operations in the pinned SDK."""


def route_operations(routes: Iterable[tuple[str, str]]) -> dict[str, Operation]:
    """Each route ("POST", "/v1/refunds/{id}") as its SDK operation, by route name
    ("POST /v1/refunds/{id}"). A route the SDK does not have is an error: the sandbox imitates
    Stripe's API, it does not extend it."""
    found: dict[str, Operation] = {}
    missing = []
    for method, pattern in routes:
        operation = operation_for(method, pattern)
        if operation is None:
            missing.append(f"{method} {pattern}")
        else:
            found[f"{method} {pattern}"] = operation
    if missing:
        raise RouteWithoutOperation(
            "Routes Stripe's API (the pinned SDK) does not have: " + ", ".join(missing)
        )
    return found


def upload_form(fields: dict[str, str], uploads: dict[str, tuple[str, bytes]]) -> dict[str, Any]:
    """A multipart upload's fields decoded as a form (`file_link_data[create]`), each uploaded
    file by its field name (the SDK types `file` as Any)."""
    data = decode_form(urlencode(list(fields.items())))
    data.update({name: filename for name, (filename, _content) in uploads.items()})
    return data


def _from_adapter(headers: dict[str, str]) -> bool:
    agent = headers.get("user-agent") or headers.get("User-Agent") or ""
    return ADAPTER_AGENT in agent


def request_refusal(
    operation: Operation, data: dict[str, Any], headers: dict[str, str]
) -> StripeError | None:
    """Stripe's 400 for the first way the parameters depart from the operation's Params type
    (never stored under the idempotency key: parameter validation precedes execution), or None.
    The check is recorded when the recorder is on."""
    violations = check_params(operation, data)
    if RECORDER.enabled:
        RECORDER.record_request(operation.name, violations, from_adapter=_from_adapter(headers))
    if not violations:
        return None
    first = violations[0]
    return StripeError(400, first.message, code=first.code, param=first.param, stored=False)


def _expand(data: dict[str, Any] | None) -> list[str]:
    value = (data or {}).get("expand")
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def record_answer(
    state: State, operation: Operation, data: dict[str, Any] | None, status: int, body: bytes
) -> None:
    """The body a Stripe route answered, against its class (an error against ErrorObject).
    Objects a test tampered with (/_sandbox/tamper) are deliberate lies and are skipped."""
    if not RECORDER.enabled or not body:
        return
    try:
        payload = json.loads(body)
    except ValueError:
        return  # not JSON (a file's contents): nothing to check
    if status >= 400:
        RECORDER.record_error(payload, where=operation.name)
    else:
        RECORDER.record_object(
            payload,
            expanded=_expand(data),
            skip_ids=state.world.tampered,
            where=operation.name,
        )


def record_event(state: State, event: dict[str, Any]) -> None:
    """An event the sandbox emitted, as a webhook endpoint receives it (nothing expanded)."""
    if RECORDER.enabled:
        RECORDER.record_object(
            event, expanded=(), skip_ids=state.world.tampered, where=f"event {event['type']}"
        )
