"""Paths and operators of SPEC §6. A condition is true, false or unknown (None): a path that does
not resolve makes its condition unknown for every operator but `exists` (then false), so an
unknown condition never verifies or contradicts by accident."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from verification.contracts import Operator, is_path

_MISSING = object()


@dataclass(frozen=True)
class Context:
    """What paths resolve against: `$observed.<channel>`, `$action.result`, `$input`,
    `$operation.id`, `$operation.created_at`. A channel absent from `observed` was not observed."""

    observed: dict[str, Any]
    action_result: dict[str, Any]
    input: dict[str, Any]
    operation_id: str
    operation_created_at: Any

    def resolve(self, path: str) -> Any:
        """The value at `path`, or _MISSING."""
        parts = path[1:].split(".")
        root = parts[0]
        if root == "observed":
            node: Any = self.observed
            rest = parts[1:]
        elif root == "action":
            node, rest = self.action_result, parts[2:]
        elif root == "input":
            node, rest = self.input, parts[1:]
        elif root == "operation":
            return self.operation_id if parts[1] == "id" else self.operation_created_at
        else:
            return _MISSING
        for part in rest:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return _MISSING
        return node


def missing(value: Any) -> bool:
    return value is _MISSING


# --- time ----------------------------------------------------------------------------------

# The seconds' fraction, in every way Python's ISO-8601 parser accepts a time: extended or basic
# format (10:00:01.5, 100001.5), a full stop or a comma before it.
_ISO_FRACTION = re.compile(r"\d{2}:?\d{2}:?\d{2}[.,](\d+)")


def as_instant(value: Any) -> tuple[Decimal, Decimal] | None:
    """(seconds since the epoch, precision in seconds) for a datetime, an ISO-8601 string or epoch
    seconds; None if it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value), Decimal(1)
    if isinstance(value, float):
        return Decimal(repr(value)), Decimal("0.000001")
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return Decimal(str(moment.timestamp())).quantize(Decimal("0.000001")), Decimal("0.000001")
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        fraction = _ISO_FRACTION.search(value)
        digits = len(fraction.group(1)) if fraction else 0
        precision = Decimal(1).scaleb(-min(digits, 6))
        seconds, _ = as_instant(moment) or (Decimal(0), Decimal(0))
        return seconds, precision
    return None


def _floor(value: Decimal, precision: Decimal) -> Decimal:
    return (value / precision).to_integral_value(rounding="ROUND_FLOOR") * precision


def compare_times(a: Any, b: Any, skew_s: float) -> tuple[Decimal, Decimal, Decimal] | None:
    """Both instants floored to the coarser precision (never rounded), and the skew; None if either
    side is not a time."""
    left, right = as_instant(a), as_instant(b)
    if left is None or right is None:
        return None
    precision = max(left[1], right[1])
    return _floor(left[0], precision), _floor(right[0], precision), Decimal(str(skew_s))


# --- operators -----------------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _ordered(a: Any, b: Any) -> bool:
    return (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))


def same(a: Any, b: Any) -> bool:
    """JSON equality: a boolean equals only a boolean (Python's `True == 1` would let a provider's
    `1` satisfy an expected `true`), numbers compare by value (`1 == 1.0`, one JSON number), lists
    and objects element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return bool(a == b)


def apply(operator: Operator, actual: Any, expected: Any, *, skew_s: float) -> bool | None:
    """The operator on resolved values; `actual`/`expected` may be _MISSING. None = unknown."""
    if operator is Operator.EXISTS:
        return not missing(actual) and actual is not None
    if missing(actual) or missing(expected):
        return None
    if operator is Operator.EQ:
        return same(actual, expected)
    if operator is Operator.NE:
        return not same(actual, expected)
    if operator in (Operator.IN, Operator.NOT_IN):
        if not isinstance(expected, list):
            return None
        inside = any(same(actual, item) for item in expected)
        return inside if operator is Operator.IN else not inside
    if operator in (Operator.GT, Operator.GTE, Operator.LT, Operator.LTE):
        if not _ordered(actual, expected):
            return None
        return {
            Operator.GT: actual > expected,
            Operator.GTE: actual >= expected,
            Operator.LT: actual < expected,
            Operator.LTE: actual <= expected,
        }[operator]
    compared = compare_times(actual, expected, skew_s)
    if compared is None:
        return None
    a, b, skew = compared
    if operator is Operator.TIME_AFTER:
        return a >= b - skew
    return a < b - skew  # TIME_BEFORE


@dataclass(frozen=True)
class Evaluated:
    result: bool | None
    actual: Any
    expected: Any


def evaluate(
    path: str, operator: Operator, expected: Any, context: Context, *, skew_s: float
) -> Evaluated:
    actual = context.resolve(path)
    wanted = context.resolve(expected) if is_path(expected) else expected
    return Evaluated(
        apply(operator, actual, wanted, skew_s=skew_s),
        None if missing(actual) else actual,
        None if missing(wanted) else wanted,
    )
