"""Amounts as people type them, in dollars (`12.50`, `$12.50`, `.5`, `5,00`), read exactly: never
through a float, never a sign, an exponent or a word (`NaN`, `1e3`, `-5`). One reader for every
form and search box that takes money (the admin's amount search, its money forms, the buyer's
refund form), so a dollar means the same everywhere; each caller adds its own rules (a refund is
whole cents, at least one).

A comma is never a thousands separator (issue 41: `5,00` was read as $500). It is the decimal mark
where it can only be one: a single comma, one or two digits after it, no dot (`5,00`, `5,5`,
`,50`). Any other comma (`1,000`, `1,000.50`, `1.000,50`) is ambiguous and refused, in words that
say to use a dot for cents and no thousands separator."""

from __future__ import annotations

import re
from decimal import Decimal

MICRO_PER_DOLLAR = 1_000_000
# Longer than any amount Vouch holds ($5,000.00 is 7 characters) with room for micro-dollars.
MAX_TEXT = 20
# Digits with an optional decimal part, or a decimal part alone.
_DOLLARS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
# A comma that can only be the decimal mark: one, with one or two digits (cents) after it.
_DECIMAL_COMMA = re.compile(r"[0-9]*,[0-9]{1,2}")

NOT_AN_AMOUNT = "Enter the amount in dollars, as a number such as 12.50."
USE_A_DOT = (
    "Use a dot for cents and no thousands separator: for example 1000.50 for one thousand "
    "dollars and fifty cents, or 5.00 for five dollars."
)


class AmountUnreadable(ValueError):
    """What was typed is not an amount in dollars; `message` says so in words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def dollars_read(text: str) -> Decimal:
    """The dollars `text` names (`$` and spaces around allowed, a comma as the decimal mark where
    it can only be one), or AmountUnreadable, in words, when it is not a plain non-negative
    amount of at most MAX_TEXT characters."""
    cleaned = text.strip().removeprefix("$").strip()
    if "," in cleaned:
        if not _DECIMAL_COMMA.fullmatch(cleaned):
            raise AmountUnreadable(USE_A_DOT)
        cleaned = cleaned.replace(",", ".")
    if len(cleaned) > MAX_TEXT or not _DOLLARS.fullmatch(cleaned):
        raise AmountUnreadable(NOT_AN_AMOUNT)
    return Decimal(cleaned)


def dollars_typed(text: str) -> Decimal | None:
    """The dollars `text` names, as dollars_read reads them, or None when it names none."""
    try:
        return dollars_read(text)
    except AmountUnreadable:
        return None


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
