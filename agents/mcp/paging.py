"""Lists at /mcp are paged by keyset, never cut: each page says `has_more`, and `next_cursor` (an
opaque, signed token) asks for the rows after the last one shown, in the list's total order. Rows
added or removed between two calls never make a page skip or repeat one that stays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.core import signing
from django.db.models import Model, Q, QuerySet

from core.exceptions import InvalidInput

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Page(Generic[M]):
    rows: list[M]
    has_more: bool
    next_cursor: str | None


def page(
    queryset: QuerySet[M],
    *,
    order: Sequence[str],
    limit: int,
    cursor: str | None,
    scope: str,
    bound_to: dict[str, Any],
) -> Page[M]:
    """At most `limit` rows of `queryset` in `order` (field names, `-` for descending, ending with
    a unique one), after the row `cursor` names. `scope` (the tool) and `bound_to` (the caller and
    the list's filters) are sealed into the cursor: a cursor given out for another list, person or
    filter, or altered, is `validation_error`."""
    if cursor is not None:
        queryset = queryset.filter(_after(order, _cursor_values(cursor, scope, bound_to, order)))
    rows = list(queryset.order_by(*order)[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if has_more:
        last = rows[-1]
        values = [_encode(getattr(last, name.lstrip("-"))) for name in order]
        next_cursor = signing.dumps({"k": values, "b": bound_to}, salt=_salt(scope))
    return Page(rows, has_more, next_cursor)


def _salt(scope: str) -> str:
    return f"vouch.mcp.cursor:{scope}"


def _bad_cursor() -> InvalidInput:
    return InvalidInput(
        "cursor is not one this list gave out: pass the next_cursor of the previous page, with "
        "the same filters.",
        details={"cursor": ["Invalid cursor."]},
    )


def _cursor_values(
    cursor: str, scope: str, bound_to: dict[str, Any], order: Sequence[str]
) -> list[Any]:
    try:
        payload = signing.loads(cursor, salt=_salt(scope))
    except signing.BadSignature as exc:
        raise _bad_cursor() from exc
    if (
        not isinstance(payload, dict)
        or payload.get("b") != bound_to
        or not isinstance(payload.get("k"), list)
        or len(payload["k"]) != len(order)
    ):
        raise _bad_cursor()
    try:
        return [_decode(value) for value in payload["k"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad_cursor() from exc


def _after(order: Sequence[str], values: list[Any]) -> Q:
    """Rows strictly after `values` in `order`: (a > x) or (a = x and b > y) or …"""
    condition = Q()
    equal = Q()
    for name, value in zip(order, values, strict=True):
        field = name.lstrip("-")
        beyond = Q(**{f"{field}__{'lt' if name.startswith('-') else 'gt'}": value})
        condition |= equal & beyond
        equal &= Q(**{field: value})
    return condition


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"dt": value.isoformat()}
    if value is None or isinstance(value, bool | int | str):
        return value
    raise TypeError(f"cannot page on a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return datetime.fromisoformat(str(value["dt"]))
    if value is None or isinstance(value, bool | int | str):
        return value
    raise TypeError(type(value).__name__)
