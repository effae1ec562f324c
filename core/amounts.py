"""Amounts as people type them, in dollars (`12.50`, `$12.50`, `1,250`, `.5`), read exactly: never
through a float, never a sign, an exponent or a word (`NaN`, `1e3`, `-5`). One reader for every
form and search box that takes money (the admin's amount search, its adjustment form, the buyer's
refund form), so a dollar means the same everywhere; each caller adds its own rules (a refund is
whole cents, at least one)."""

from __future__ import annotations

import re
from decimal import Decimal

MICRO_PER_DOLLAR = 1_000_000
# Longer than any amount Vouch holds ($5,000.00 is 7 characters) with room for micro-dollars.
MAX_TEXT = 20
# Digits with an optional decimal part, or a decimal part alone.
_DOLLARS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def dollars_typed(text: str) -> Decimal | None:
    """The dollars `text` names (`$` and thousands' commas allowed, spaces around), or None when
    it is not a plain non-negative amount of at most MAX_TEXT characters."""
    cleaned = text.strip().removeprefix("$").replace(",", "").strip()
    if len(cleaned) > MAX_TEXT or not _DOLLARS.fullmatch(cleaned):
        return None
    return Decimal(cleaned)


def micro_from_dollars(text: str) -> int | None:
    """The micro-dollars `text` names in dollars, or None when it is not an amount or is finer
    than a micro-dollar (`0.0000001`): exact, from the decimal digits."""
    amount = dollars_typed(text)
    if amount is None:
        return None
    micro = amount.scaleb(6)
    if micro != micro.to_integral_value():
        return None
    return int(micro)
