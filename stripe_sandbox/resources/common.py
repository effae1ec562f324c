"""What every resource shares: a handler's answer, lists a page at a time (Stripe's cursors
and `created` filter), reading one object (unless readback lag still hides it) and `expand`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import invalid, resource_missing
from stripe_sandbox.params import Params
from stripe_sandbox.state import RequestContext, State
from stripe_sandbox.timeline import Key

Result = tuple[int, dict[str, Any]]
Handler = Callable[..., Result]


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


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
        "balance_transaction": state.world.balance_transactions,
        "failure_balance_transaction": state.world.balance_transactions,
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


def retriever(table: str, kind: str) -> Handler:
    """GET /v1/<objects>/{id}: the object as it is now, unless readback lag still hides it (its
    parameters were checked against the SDK's Retrieve Params before the handler ran)."""

    def retrieve(state: State, ctx: RequestContext, data: dict[str, Any], object_id: str) -> Result:
        params = Params(data)
        obj = _get(state, getattr(state.world, table), kind, object_id)
        return 200, _expand(state, state.render(obj), params)

    return retrieve
