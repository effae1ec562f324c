"""A difference between what was sent or answered and what the pinned SDK declares."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Kinds of request violations, most fundamental first: Stripe refuses a request for the first.
REQUEST_KINDS = ("removed", "unknown", "missing", "empty", "type", "enum")
# Kinds of object violations.
OBJECT_KINDS = ("undeclared", "missing", "fixture_missing", "not_expanded", "type", "enum")


@dataclass(frozen=True, slots=True)
class Violation:
    """`param` is Stripe's name for a request parameter
    (`evidence[appeal][card][reason_for_filing]`) or the JSON path of an object's field
    (`evidence.appeal.card`, `data[0].amount`). `kind` says what is wrong (REQUEST_KINDS,
    OBJECT_KINDS); `code` is the error code Stripe answers a request refused for it with (None
    where Stripe's error carries no code, and for objects)."""

    param: str
    kind: str
    message: str
    code: str | None = None
    # For an object: the innermost resource holding the field (`refund` for `data[2].amount` of
    # a list of refunds) and the field's path in it, without list indexes (`amount`).
    resource: str | None = None
    field: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
