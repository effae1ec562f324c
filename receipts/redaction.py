"""The redacted native detail of a receipt (SPEC §8): the provider's object reduced by an
ALLOW-list per object type. A field is kept only if it is named here; everything else (billing
details, e-mail, names, addresses, phone numbers, card numbers and last digits, expiry dates,
shipping, customer) is dropped whatever the provider adds in future. Kept values are scalars; an
expanded object in a field that should hold an id is reduced to its id.

A charge keeps its card's brand and fingerprint (`payment_method_details.card`): the fingerprint
names the card, not its number, and Visa Compelling Evidence 3.0 asks for prior charges on the same
card (docs/decisions/0012-ce3-data-elements-in-receipts.md). Vouch's `vouch_*` metadata is kept,
the data elements a funding sent among it (account, IP address, device)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Nested:
    """The allow-list of a nested object: its scalar fields kept, and its own nested objects."""

    fields: frozenset[str]
    nested: Mapping[str, Nested] = field(default_factory=dict)


# Top-level scalar fields kept, per provider object type.
ALLOWED: dict[str, frozenset[str]] = {
    "charge": frozenset(
        {
            "id",
            "object",
            "amount",
            "amount_captured",
            "amount_refunded",
            "captured",
            "created",
            "currency",
            "status",
            "paid",
            "refunded",
            "disputed",
            "payment_intent",
            "livemode",
            "failure_code",
        }
    ),
    "refund": frozenset(
        {
            "id",
            "object",
            "amount",
            "charge",
            "created",
            "currency",
            "status",
            "reason",
            "failure_reason",
            "payment_intent",
            "livemode",
        }
    ),
}
# Nested objects of which only the named fields are kept (at any depth, as named).
ALLOWED_NESTED: dict[str, dict[str, Nested]] = {
    "charge": {
        "payment_method_details": Nested(
            frozenset({"type"}),
            {"card": Nested(frozenset({"brand", "fingerprint"}))},
        )
    },
    # A card refund's reference at the network (the ARN a buyer's bank traces it by) and its
    # status: issue 41 item 9.
    "refund": {
        "destination_details": Nested(
            frozenset({"type"}),
            {
                "card": Nested(
                    frozenset({"reference", "reference_status", "reference_type", "type"})
                )
            },
        )
    },
}
# Fields that name another object by id (Stripe may expand them into the object itself).
ID_FIELDS = frozenset({"payment_intent", "charge"})
# Metadata keys kept: Vouch's own markers only (SPEC §3), never a caller's.
METADATA_PREFIX = "vouch_"

Scalar = str | int | bool | None


def _scalar(value: Any) -> tuple[bool, Scalar]:
    # bool is an int: both are kept as they are. Floats are not expected in these fields and
    # would make the canonical form depend on number formatting: dropped.
    if value is None or isinstance(value, str | bool | int):
        return True, value
    return False, None


def _nested(obj: dict[str, Any], allowed: Nested) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name in sorted(allowed.fields):
        if name in obj:
            ok, value = _scalar(obj[name])
            if ok:
                kept[name] = value
    for name, inner in sorted(allowed.nested.items()):
        if isinstance(obj.get(name), dict):
            kept[name] = _nested(obj[name], inner)
    return kept


def redact(object_type: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The allow-listed part of a provider object of `object_type` (`charge`, `refund`)."""
    try:
        allowed = ALLOWED[object_type]
    except KeyError:
        raise ValueError(f"no allow-list for provider objects of type {object_type!r}") from None
    detail: dict[str, Any] = {}
    for name in sorted(allowed):
        if name not in obj:
            continue
        value = obj[name]
        if name in ID_FIELDS and isinstance(value, dict):
            value = value.get("id")
        ok, kept = _scalar(value)
        if ok:
            detail[name] = kept
    for name, nested in ALLOWED_NESTED[object_type].items():
        if isinstance(obj.get(name), dict):
            detail[name] = _nested(obj[name], nested)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        detail["metadata"] = {
            str(key): value
            for key, value in sorted(metadata.items())
            if str(key).startswith(METADATA_PREFIX) and isinstance(value, str)
        }
    return detail
