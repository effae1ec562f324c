"""Searching the ops lists by an amount in dollars (issue 13): what a term means, exactly."""

from __future__ import annotations

import pytest

from core.admin_base import amount_micro_searched


@pytest.mark.parametrize(
    ("term", "micro"),
    [
        ("12.50", 12_500_000),
        ("$12.50", 12_500_000),
        (" 12.5 ", 12_500_000),
        ("12", 12_000_000),
        ("1250.00", 1_250_000_000),
        ("12,50", 12_500_000),  # a decimal comma (issue 41)
        ("0.000001", 1),
        ("3.005433", 3_005_433),
        (".5", 500_000),
    ],
)
def test_an_amount_in_dollars_is_read_exactly(term: str, micro: int) -> None:
    assert amount_micro_searched(term) == micro


@pytest.mark.parametrize(
    "term",
    [
        "",
        "$",
        ".",
        "1.2.3",
        "1,250.00",
        "0.0000001",
        "re_123",
        "env_12",
        "12 50",
        "-5",
        "1e3",
        "NaN",
        "9" * 21,
    ],
)
def test_anything_else_is_not_an_amount(term: str) -> None:
    assert amount_micro_searched(term) is None
