"""A comma in an amount typed in dollars (core.amounts, issue 41 item 4): `5,00` was read as $500.
A comma is the decimal mark where it can only be one (one comma, one or two digits after it, no
dot); anything else with a comma (`1,000`, `1,000.50`, `1.000,50`) is refused with words that say
to use a dot for cents and no thousands separator. Never a thousands separator in a money field,
on every form that takes dollars: the buyer's refund form, the admin's money fields, the search."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from core.amounts import (
    MAX_TEXT,
    NOT_AN_AMOUNT,
    USE_A_DOT,
    AmountUnreadable,
    dollars_read,
    dollars_typed,
    micro_from_dollars,
)
from core.forms import DollarsField
from envelopes.exceptions import InvalidAmount
from envelopes.selectors.buyer import dollars_to_micro


@pytest.mark.parametrize(
    ("text", "dollars"),
    [
        ("5,00", "5.00"),
        ("5,5", "5.50"),
        ("$5,05", "5.05"),
        (" 12,50 ", "12.50"),
        (",5", "0.50"),
        ("  5.00 ", "5.00"),
        ("$5", "5"),
    ],
)
def test_a_comma_before_cents_is_the_decimal_mark(text: str, dollars: str) -> None:
    assert dollars_read(text) == Decimal(dollars)
    assert micro_from_dollars(text) == int(Decimal(dollars) * 1_000_000)


@pytest.mark.parametrize(
    "text",
    ["1,000", "1,000.50", "1.000,50", "$1,250.00", "1,2,3", "5,", "5,000", "5,0001", "1,5.0"],
)
def test_any_other_comma_is_refused_saying_to_use_a_dot(text: str) -> None:
    with pytest.raises(AmountUnreadable) as refused:
        dollars_read(text)
    assert refused.value.message == USE_A_DOT
    assert "dot" in USE_A_DOT
    assert "thousands separator" in USE_A_DOT
    assert dollars_typed(text) is None
    assert micro_from_dollars(text) is None


@pytest.mark.parametrize(
    "text", ["", "  ", "-5", "5e3", "NaN", "five", "$", "$-5", "1" * (MAX_TEXT + 1), "5 00"]
)
def test_what_is_not_an_amount_is_refused_in_words(text: str) -> None:
    with pytest.raises(AmountUnreadable) as refused:
        dollars_read(text)
    assert refused.value.message == NOT_AN_AMOUNT


def test_the_refund_form_reads_5_comma_00_as_five_dollars_and_refuses_1_comma_000() -> None:
    assert dollars_to_micro("5,00") == 5_000_000
    assert dollars_to_micro("5,5") == 5_500_000
    for text in ("1,000", "1,000.50", "1.000,50", "1,200"):
        with pytest.raises(InvalidAmount) as refused:
            dollars_to_micro(text)
        assert refused.value.message == USE_A_DOT
    with pytest.raises(InvalidAmount) as huge:
        dollars_to_micro("9" * MAX_TEXT)
    assert huge.value.message == "A refund is at most $5,000.00."


def test_the_admins_money_field_reads_the_same_and_says_the_same() -> None:
    field = DollarsField()
    assert field.clean("5,00") == 5_000_000
    with pytest.raises(ValidationError) as refused:
        field.clean("1,000")
    assert USE_A_DOT in str(refused.value)


@given(cents=st.integers(min_value=0, max_value=99_999_999))
def test_dot_and_decimal_comma_name_the_same_cents(cents: int) -> None:
    whole, part = divmod(cents, 100)
    dotted = f"{whole}.{part:02d}"
    assert micro_from_dollars(dotted) == cents * 10_000
    assert micro_from_dollars(dotted.replace(".", ",")) == cents * 10_000


@given(whole=st.integers(min_value=1, max_value=999), group=st.integers(0, 999))
def test_a_thousands_group_is_never_read_as_anything(whole: int, group: int) -> None:
    text = f"{whole},{group:03d}"
    assert micro_from_dollars(text) is None
    assert micro_from_dollars(text + ".50") is None


@given(text=st.text(max_size=30))
def test_whatever_is_typed_is_read_exactly_or_refused_in_words(text: str) -> None:
    try:
        amount = dollars_read(text)
    except AmountUnreadable as refused:
        said = refused.message
    else:
        said = ""
        assert amount >= 0
        assert amount == Decimal(text.strip().removeprefix("$").strip().replace(",", "."))
    assert said in ("", NOT_AN_AMOUNT, USE_A_DOT)
