"""Money and units (SPEC §1): every `<base>_micro` integer in a response gains exactly one
`<base>_usd` twin, the same amount in dollars computed from the integer; nothing else gains one;
cents exist only at the provider boundary, rounded down. Pure functions: no database."""

from typing import Any

import pytest

from envelopes.money import to_cents, usd, with_usd


@pytest.mark.parametrize(
    ("micro", "dollars"),
    [
        (50_000, 0.05),  # SPEC §1's own example
        (0, 0.0),
        (1, 0.000001),  # one micro-dollar is the sixth decimal place
        (10_000, 0.01),
        (1_000_000, 1.0),
        (123_456_789, 123.456789),
        (5_000_000_000, 5000.0),  # the largest envelope
        (-2_500_000, -2.5),  # a negative delta (a release in the journal) reads the same way
    ],
)
def test_usd_is_the_micro_amount_in_dollars(micro: int, dollars: float) -> None:
    assert usd(micro) == dollars
    assert type(usd(micro)) is float  # a JSON number, not a string or a Decimal


@pytest.mark.parametrize(
    ("micro", "cents"),
    [
        (0, 0),
        (1, 0),
        (9_999, 0),  # a sub-cent amount is never rounded up into a cent
        (10_000, 1),
        (10_001, 1),
        (19_999, 1),
        (20_000, 2),
        (1_000_000, 100),
        (5_000_009_999, 500_000),
    ],
)
def test_to_cents_rounds_down_at_every_cent_boundary(micro: int, cents: int) -> None:
    assert to_cents(micro) == cents
    assert type(to_cents(micro)) is int  # Stripe's `amount` is an integer number of cents


def test_a_money_response_has_exactly_one_usd_twin_per_integer_micro_field() -> None:
    body = {
        "refund_id": "erf_1",
        "requested_micro": 2_505_000,
        "status": "refunded",
        "remainder_micro": 5_000,
    }
    assert with_usd(body) == {
        "refund_id": "erf_1",
        "requested_micro": 2_505_000,
        "requested_usd": 2.505,
        "status": "refunded",
        "remainder_micro": 5_000,
        "remainder_usd": 0.005,
    }


def test_the_usd_twin_follows_its_micro_field_in_the_response() -> None:
    """The twin is written right after the field it reads: a person scanning the JSON sees the
    pair together, in the order the fields were given."""
    keys = list(with_usd({"b_micro": 1, "a": 0, "c_micro": 2}))
    assert keys == ["b_micro", "b_usd", "a", "c_micro", "c_usd"]


@pytest.mark.parametrize(
    "field",
    [
        "amount",  # not a micro field
        "micro",  # no base name before the suffix
        "amount_micros",  # another suffix
        "micro_amount",  # the word, but not as the suffix
        "amount_cents",
        "sequence",
    ],
)
def test_a_field_that_is_not_micro_gains_no_usd_twin(field: str) -> None:
    assert with_usd({field: 1_000_000}) == {field: 1_000_000}


@pytest.mark.parametrize(
    "value",
    [
        None,  # a null amount (e.g. not known yet) has no dollar reading
        True,  # a boolean is not an amount, even though Python counts it as an integer
        False,
        "1000000",  # a string is not the integer SPEC §1 requires
        1_000_000.0,  # nor is a float
    ],
)
def test_a_micro_field_that_is_not_an_integer_gains_no_usd_twin(value: Any) -> None:
    assert with_usd({"amount_micro": value}) == {"amount_micro": value}


def test_a_null_micro_value_stays_null_beside_the_integer_ones() -> None:
    assert with_usd({"failed_micro": None, "refunded_micro": 0}) == {
        "failed_micro": None,
        "refunded_micro": 0,
        "refunded_usd": 0.0,
    }


def test_twins_are_added_in_nested_objects_and_lists() -> None:
    body = {
        "envelope": {"unspent_micro": 1_500_000, "public_id": "env_1"},
        "legs": [
            {"amount_micro": 1_000_000, "outcome": "accepted"},
            {"amount_micro": 500_000, "outcome": "refused"},
        ],
        "notes": ["a_micro", 3],
    }
    assert with_usd(body) == {
        "envelope": {"unspent_micro": 1_500_000, "unspent_usd": 1.5, "public_id": "env_1"},
        "legs": [
            {"amount_micro": 1_000_000, "amount_usd": 1.0, "outcome": "accepted"},
            {"amount_micro": 500_000, "amount_usd": 0.5, "outcome": "refused"},
        ],
        "notes": ["a_micro", 3],  # strings in a list are values, not field names
    }


def test_the_input_is_left_as_it_was() -> None:
    """The twins are added to a copy: the data the caller holds (a model's figures, a stored
    answer) is not changed by rendering it."""
    leg = {"amount_micro": 10_000}
    body = {"legs": [leg], "total_micro": 10_000}
    with_usd(body)
    assert body == {"legs": [{"amount_micro": 10_000}], "total_micro": 10_000}


@pytest.mark.parametrize("value", ["text", 7, None, 1.5])
def test_a_plain_value_is_returned_as_it_is(value: Any) -> None:
    assert with_usd(value) == value
