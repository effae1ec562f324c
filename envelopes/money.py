"""Micro-dollars: integers everywhere; the `_usd` twin for reading; cents only at the provider."""

from decimal import Decimal
from typing import Any

from envelopes.models import MICRO_PER_CENT


def usd(micro: int) -> float:
    """The same amount in dollars, computed with Decimal from the integer (never float division)."""
    return float(Decimal(micro).scaleb(-6))


# Integer micro-dollars everywhere, cents only here, rounded down:
# docs/decisions/0001-micro-dollars.md
def to_cents(micro: int) -> int:
    """The provider boundary: round down."""
    return micro // MICRO_PER_CENT


def with_usd(data: Any) -> Any:
    """Every `<base>_micro` field gains its `<base>_usd` twin, recursively."""
    if isinstance(data, dict):
        result: dict[str, Any] = {}
        for key, value in data.items():
            result[key] = with_usd(value)
            if key.endswith("_micro") and isinstance(value, int) and not isinstance(value, bool):
                result[key[: -len("_micro")] + "_usd"] = usd(value)
        return result
    if isinstance(data, list):
        return [with_usd(item) for item in data]
    return data
