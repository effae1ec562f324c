"""Provider events (SPEC §7): what a storable event is, and the handlers other apps register for
event types. Handlers run after the event is stored, asynchronously, and must re-read provider
state rather than trust event order."""

import math
import re
from collections.abc import Callable
from typing import Any

from core.exceptions import VouchError

Handler = Callable[..., None]
_HANDLERS: dict[str, list[Handler]] = {}

# The columns' own bounds (ProviderEvent.event_id, .type) and the dates Python and the admin can
# show: `created` is epoch seconds from 1970 to the end of year 9999.
MAX_ID_LENGTH = 255
MAX_TYPE_LENGTH = 100
MAX_CREATED = 253_402_300_799  # 9999-12-31T23:59:59Z
# Stripe's events nest about ten levels; far deeper is not an event (and would exhaust the stack
# of whoever walks it next).
MAX_DEPTH = 64
# PostgreSQL stores neither NUL in text or JSON nor a lone surrogate (no UTF-8 encoding exists).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class InvalidProviderEvent(VouchError):
    """A payload whose signature verified but that is not an event Vouch can store: refused
    whole, nothing stored. `details["field"]` names the offending field."""

    code = "invalid_event"
    status_code = 400
    default_message = "The payload is not a provider event Vouch can store."


def _refuse(field: str, message: str) -> InvalidProviderEvent:
    return InvalidProviderEvent(message, details={"field": field})


def event_check(event: Any) -> None:
    """Raise InvalidProviderEvent unless `event` is a storable provider event: an object with a
    string `id` of 1 to 255 characters, a string `type` of 1 to 100, an integer `created` (epoch
    seconds, 0 up to the end of year 9999; not a bool, float or string) and a `data` object
    holding an `object` object; nested at most MAX_DEPTH deep, with no NUL or lone surrogate in
    any string or key and no non-finite number anywhere."""
    if not isinstance(event, dict):
        raise _refuse("event", "The payload is not a JSON object.")
    event_id = event.get("id")
    if not isinstance(event_id, str) or not 0 < len(event_id) <= MAX_ID_LENGTH:
        raise _refuse("id", f"`id` must be a string of 1 to {MAX_ID_LENGTH} characters.")
    event_type = event.get("type")
    if not isinstance(event_type, str) or not 0 < len(event_type) <= MAX_TYPE_LENGTH:
        raise _refuse("type", f"`type` must be a string of 1 to {MAX_TYPE_LENGTH} characters.")
    created = event.get("created")
    if type(created) is not int or not 0 <= created <= MAX_CREATED:
        raise _refuse(
            "created", f"`created` must be an integer of epoch seconds from 0 to {MAX_CREATED}."
        )
    data = event.get("data")
    if not isinstance(data, dict):
        raise _refuse("data", "`data` must be an object.")
    if not isinstance(data.get("object"), dict):
        raise _refuse("data.object", "`data.object` must be an object.")
    _check_values(event)


def _check_values(event: dict[str, Any]) -> None:
    """Walk the whole payload without recursion (its depth is what is being checked)."""
    stack: list[tuple[Any, int]] = [(event, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                raise _refuse("event", f"The payload nests deeper than {MAX_DEPTH} levels.")
            for key, value in node.items():
                _check_string(key)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                raise _refuse("event", f"The payload nests deeper than {MAX_DEPTH} levels.")
            stack.extend((value, depth + 1) for value in node)
        elif isinstance(node, str):
            _check_string(node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise _refuse("event", "The payload holds a number JSON does not define (NaN, ±∞).")


def _check_string(value: str) -> None:
    if _UNSTORABLE.search(value):
        raise _refuse(
            "event",
            "The payload holds a NUL character or a lone surrogate, which cannot be stored.",
        )


def register(event_type: str, handler: Handler) -> None:
    if handler not in _HANDLERS.setdefault(event_type, []):
        _HANDLERS[event_type].append(handler)


def handlers_for(event_type: str) -> list[Handler]:
    return list(_HANDLERS.get(event_type, []))


def dispatch(event: dict[str, Any]) -> None:
    for handler in handlers_for(str(event.get("type", ""))):
        handler(event=event)
