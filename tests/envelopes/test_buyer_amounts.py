"""The refund form's amount (envelopes.selectors.buyer.dollars_to_micro, issue 27): dollars in
whole cents, at least one cent, at most what an envelope can hold; every refusal in words."""

from __future__ import annotations

import pytest

from core.amounts import USE_A_DOT
from envelopes.exceptions import InvalidAmount
from envelopes.selectors.buyer import MAX_FORM_MICRO, dollars_to_micro


@pytest.mark.parametrize(
    ("text", "micro"),
    [
        ("0.01", 10_000),
        ("$12.50", 12_500_000),
        ("1200", 1_200_000_000),
        ("12,50", 12_500_000),  # a decimal comma (issue 41)
        ("12.5", 12_500_000),
        ("5000", MAX_FORM_MICRO),
        ("4999.99", MAX_FORM_MICRO - 10_000),
    ],
)
def test_dollars_in_whole_cents_are_micro_dollars(text: str, micro: int) -> None:
    assert dollars_to_micro(text) == micro


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ten", "Enter the amount in dollars, as a number such as 12.50."),
        ("-1", "Enter the amount in dollars, as a number such as 12.50."),
        ("1,200", USE_A_DOT),  # never a thousands separator (issue 41)
        ("0", "A refund is at least one cent ($0.01)."),
        ("0.009", "A refund is at least one cent ($0.01)."),
        ("5000.01", "A refund is at most $5,000.00."),
        ("1.001", "Enter whole cents: at most two digits after the decimal point."),
        ("0.015", "Enter whole cents: at most two digits after the decimal point."),
    ],
)
def test_anything_else_is_refused_in_words(text: str, words: str) -> None:
    with pytest.raises(InvalidAmount) as refused:
        dollars_to_micro(text)
    assert refused.value.message == words
