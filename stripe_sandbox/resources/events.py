"""Events: retrieve and list (by type, with Stripe's wildcards)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from stripe_sandbox.errors import invalid
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _page, retriever
from stripe_sandbox.state import RequestContext, State

event_retrieve = retriever("events", "event")


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
