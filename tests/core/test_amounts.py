"""Amounts typed in dollars (core.amounts, issue 27): read exactly, or not at all."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.amounts import MAX_TEXT, dollars_typed, micro_from_dollars


@pytest.mark.parametrize(
    ("text", "micro"),
    [
        ("12.50", 12_500_000),
        ("$12.50", 12_500_000),
        (" $ 12.5 ", 12_500_000),
        ("12", 12_000_000),
        ("12.", 12_000_000),
        ("1250.00", 1_250_000_000),
        ("5,00", 5_000_000),  # a decimal comma (issue 41)
        ("0.000001", 1),
        ("0", 0),
        ("3.005433", 3_005_433),
        (".5", 500_000),
        ("9" * MAX_TEXT, int("9" * MAX_TEXT) * 1_000_000),
    ],
)
def test_an_amount_in_dollars_is_read_exactly(text: str, micro: int) -> None:
    assert micro_from_dollars(text) == micro
    assert dollars_typed(text) == Decimal(micro).scaleb(-6)


@pytest.mark.parametrize(
    "text",
    ["", " ", "$", ".", "1.2.3", "1,250.00", "1,250",
     "re_123", "12 50", "-5", "+5", "1e3", "NaN", "Infinity", "$-1",
     "9" * (MAX_TEXT + 1), "\uff11\uff12"],
)  # fmt: skip
def test_anything_else_is_not_an_amount(text: str) -> None:
    assert dollars_typed(text) is None
    assert micro_from_dollars(text) is None


def test_finer_than_a_micro_dollar_is_an_amount_but_not_micro_dollars() -> None:
    assert dollars_typed("0.0000001") == Decimal("0.0000001")
    assert micro_from_dollars("0.0000001") is None
    assert micro_from_dollars("1.0000010") == 1_000_001
