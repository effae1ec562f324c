"""Events: retrieve and list (by type, with Stripe's wildcards)."""

from __future__ import annotations

import fnmatch
from typing import Any

from stripe_sandbox.errors import invalid
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _page, retriever
from stripe_sandbox.state import RequestContext, State

event_retrieve = retriever("events", "event")


def event_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """EventListParams: `type` is "a specific event name, or group of events using * as a
    wildcard"; `types` "specific event names"; "either `type` or `types`, but not both"."""
    params = Params(data)
    event_type = params.string("type")
    types = params.raw("types")  # a list of strings: the EventListParams check said so
    if event_type is not None and types is not None:
        raise invalid("You may specify either type or types, not both.", param="types")
    exact = set(types or []) | ({event_type} if event_type and "*" not in event_type else set())
    wildcard = event_type if event_type and "*" in event_type else None

    def keep(event: dict[str, Any]) -> bool:
        return event["type"] in exact or (
            wildcard is not None and fnmatch.fnmatchcase(event["type"], wildcard)
        )

    filtered = event_type is not None or types is not None
    return _page(state, "event", params, "/v1/events", keep=keep if filtered else None)
