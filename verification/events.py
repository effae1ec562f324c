"""Handlers other apps register for provider event types (SPEC §7). They run after the event is
stored, asynchronously, and must re-read provider state rather than trust event order."""

from collections.abc import Callable
from typing import Any

Handler = Callable[..., None]
_HANDLERS: dict[str, list[Handler]] = {}


def register(event_type: str, handler: Handler) -> None:
    if handler not in _HANDLERS.setdefault(event_type, []):
        _HANDLERS[event_type].append(handler)


def handlers_for(event_type: str) -> list[Handler]:
    return list(_HANDLERS.get(event_type, []))


def dispatch(event: dict[str, Any]) -> None:
    for handler in handlers_for(str(event.get("type", ""))):
        handler(event=event)
