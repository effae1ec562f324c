"""The redacted native detail of a receipt (SPEC §8): the provider's object reduced by an
ALLOW-list per object type. A field is kept only if it is named here; everything else (billing
details, e-mail, names, addresses, phone numbers, card numbers, fingerprints, expiry dates,
shipping, customer) is dropped whatever the provider adds in future. Kept values are scalars; an
expanded object in a field that should hold an id is reduced to its id."""

from __future__ import annotations

from typing import Any

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
# Nested objects of which only the named scalar fields are kept.
ALLOWED_NESTED: dict[str, dict[str, frozenset[str]]] = {
    "charge": {"payment_method_details": frozenset({"type"})},
    "refund": {},
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
    for name, fields in ALLOWED_NESTED[object_type].items():
        nested = obj.get(name)
        if not isinstance(nested, dict):
            continue
        kept_nested = {}
        for field in sorted(fields):
            if field in nested:
                ok, kept = _scalar(nested[field])
                if ok:
                    kept_nested[field] = kept
        detail[name] = kept_nested
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        detail["metadata"] = {
            str(key): value
            for key, value in sorted(metadata.items())
            if str(key).startswith(METADATA_PREFIX) and isinstance(value, str)
        }
    return detail
