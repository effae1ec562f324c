"""The cost of fighting a dispute (SPEC §17, disputes/fees.py): the fee table per currency, the
fees a dispute paid by each rule, an unknown currency refused with its code, and a posture's
costs with the break-even win probability as an exact fraction. No database: disputes are built in
memory."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from core.exceptions import InvalidInput
from disputes.exceptions import UnsupportedCurrency
from disputes.fees import (
    DisputeFeesUnknownCurrency,
    FeeTable,
    WinRecord,
    fee_table,
    fees_paid,
    is_visa_compliance,
    percent_text,
    posture_costs,
    rate_text,
)
from disputes.models import Dispute

# Distinct fees, so that one taken for another shows.
FEES = {
    "usd": {
        "dispute_fee": 1_000_000,
        "lost_dispute_fee": 20_000_000,
        "visa_compliance_fee": 300_000_000,
        "mastercard_compliance_fee": 400_000_000,
    },
    "eur": {
        "dispute_fee": 0,
        "lost_dispute_fee": 2,
        "visa_compliance_fee": 3,
        "mastercard_compliance_fee": 4,
    },
}


def dispute(status: str, types: Any = (), currency: str = "usd") -> Dispute:
    return Dispute(
        amount_micro=10_000_000,
        currency=currency,
        reason="fraudulent",
        provider_status=status,
        enhanced_eligibility_types=list(types) if isinstance(types, tuple | list) else types,
    )


# --- the table ----------------------------------------------------------------------------------


def test_the_default_table_is_stripe_us_pricing() -> None:
    assert fee_table("usd") == FeeTable(
        currency="usd",
        dispute_fee=15_000_000,
        lost_dispute_fee=15_000_000,
        visa_compliance_fee=500_000_000,
        # Stripe collects 500 USD for a contested Mastercard compliance dispute, refunded if won:
        # https://docs.stripe.com/disputes/api/mastercard-compliance
        mastercard_compliance_fee=500_000_000,
    )


@override_settings(DISPUTE_FEES=FEES)
def test_the_table_is_read_from_the_setting_per_currency_in_any_case() -> None:
    assert fee_table("USD") == FeeTable("usd", 1_000_000, 20_000_000, 300_000_000, 400_000_000)
    assert fee_table("eur") == FeeTable("eur", 0, 2, 3, 4)


@pytest.mark.parametrize("currency", ["gbp", "", "us"])
def test_a_currency_not_in_the_table_is_refused_with_its_code(currency: str) -> None:
    with pytest.raises(DisputeFeesUnknownCurrency) as refused:
        fee_table(currency)
    assert refused.value.code == "dispute_fees_unknown_currency"
    assert isinstance(refused.value, UnsupportedCurrency)
    assert refused.value.message == (
        f"The dispute fee table (DISPUTE_FEES) has no row for {currency!r}."
    )
    with pytest.raises(DisputeFeesUnknownCurrency):
        fees_paid(dispute("lost", currency=currency), True)
    with pytest.raises(DisputeFeesUnknownCurrency):
        posture_costs(amount_micro=1_000_000, currency=currency, compliance=None, own_record=None)


@pytest.mark.parametrize(
    "name",
    ["dispute_fee", "lost_dispute_fee", "visa_compliance_fee", "mastercard_compliance_fee"],
)
@pytest.mark.parametrize("value", [None, -1, "15000000", 15.0, True])
def test_a_fee_that_is_not_a_non_negative_integer_is_a_configuration_error(
    name: str, value: Any
) -> None:
    row: dict[str, Any] = {
        "dispute_fee": 1,
        "lost_dispute_fee": 2,
        "visa_compliance_fee": 3,
        "mastercard_compliance_fee": 4,
    }
    if value is None:
        del row[name]
    else:
        row[name] = value
    with override_settings(DISPUTE_FEES={"usd": row}), pytest.raises(ImproperlyConfigured) as bad:
        fee_table("usd")
    assert f"DISPUTE_FEES['usd'][{name!r}] must be a non-negative integer" in str(bad.value)


# --- fees paid ----------------------------------------------------------------------------------


@override_settings(DISPUTE_FEES=FEES)
@pytest.mark.parametrize(
    ("status", "contested", "types", "paid"),
    [
        # The dispute fee, whatever happens.
        ("won", True, (), 1_000_000),
        ("won", False, (), 1_000_000),
        ("won", True, ("visa_compliance",), 1_000_000),
        ("needs_response", True, ("visa_compliance",), 1_000_000),
        ("under_review", True, (), 1_000_000),
        # Lost without a fight: no countering fee, no network fee.
        ("lost", False, (), 1_000_000),
        ("lost", False, ("visa_compliance",), 1_000_000),
        # Lost after a fight: the countering fee, and the network's for a compliance dispute.
        ("lost", True, (), 21_000_000),
        ("lost", True, ("visa_compliance_3",), 21_000_000),
        ("lost", True, ("visa_compelling_evidence_3", "visa_compliance"), 321_000_000),
        ("lost", True, ("mastercard_compliance",), 421_000_000),
        ("lost", False, ("mastercard_compliance",), 1_000_000),
        ("won", True, ("mastercard_compliance",), 1_000_000),
    ],
)
def test_each_fee_rule(status: str, contested: bool, types: tuple[str, ...], paid: int) -> None:
    assert fees_paid(dispute(status, types), contested) == paid


def test_the_default_fees_of_a_lost_contested_compliance_dispute() -> None:
    assert fees_paid(dispute("lost", ["visa_compliance"]), True) == 530_000_000
    assert fees_paid(dispute("lost", ["mastercard_compliance"]), True) == 530_000_000
    assert fees_paid(dispute("lost"), True) == 30_000_000
    assert fees_paid(dispute("won"), True) == 15_000_000


@pytest.mark.parametrize(
    ("types", "compliance"),
    [
        ([], False),
        (["visa_compliance"], True),
        (["visa_compelling_evidence_3"], False),
        ("visa_compliance", False),  # not a list: nothing the provider said
        ({"visa_compliance": True}, False),
        (None, False),
    ],
)
def test_a_visa_compliance_dispute_is_what_the_provider_lists(types: Any, compliance: bool) -> None:
    assert is_visa_compliance(dispute("lost", types)) is compliance


# --- posture costs ------------------------------------------------------------------------------


def test_the_costs_of_each_posture() -> None:
    costs = posture_costs(
        amount_micro=100_000_000, currency="usd", compliance=None, own_record=None
    )
    assert costs == {
        "currency": "usd",
        "amount_micro": 100_000_000,
        "dispute_fee_micro": 15_000_000,
        "lost_dispute_fee_micro": 15_000_000,
        "compliance": False,
        "visa_compliance_fee_micro": 0,
        "mastercard_compliance_fee_micro": 0,
        "accept_micro": -115_000_000,
        "contest_won_micro": -15_000_000,
        "contest_lost_micro": -130_000_000,
        "break_even": "3/23",
        "break_even_decimal": "0.130435",
        "own_record": None,
        "verdict": (
            "Contesting pays when you win more than 13.0% of such disputes; "
            "you have no decided dispute of this reason yet. Advice only."
        ),
    }


@override_settings(DISPUTE_FEES=FEES)
def test_a_compliance_dispute_risks_the_network_fee_too() -> None:
    costs = posture_costs(
        amount_micro=100_000_000,
        currency="USD",
        compliance="visa_compliance",
        own_record=WinRecord(won=5, decided=10),
    )
    assert costs == {
        "currency": "usd",
        "amount_micro": 100_000_000,
        "dispute_fee_micro": 1_000_000,
        "lost_dispute_fee_micro": 20_000_000,
        "compliance": True,
        "visa_compliance_fee_micro": 300_000_000,
        "mastercard_compliance_fee_micro": 0,
        "accept_micro": -101_000_000,
        "contest_won_micro": -1_000_000,
        "contest_lost_micro": -421_000_000,
        "break_even": "16/21",
        "break_even_decimal": "0.761905",
        "own_record": {
            "won": 5,
            "decided": 10,
            "win_rate": "0.500000",
            "wilson_low": "0.236593",
            "wilson_high": "0.763407",
        },
        "verdict": (
            "Contesting pays when you win more than 76.2% of such disputes; "
            "you have won 5 of 10 (95% interval 23.7\u201376.3%). Advice only."
        ),
    }


@override_settings(DISPUTE_FEES=FEES)
def test_a_mastercard_compliance_dispute_risks_mastercards_fee() -> None:
    costs = posture_costs(
        amount_micro=100_000_000,
        currency="usd",
        compliance="mastercard_compliance",
        own_record=None,
    )
    assert costs["compliance"] is True
    assert (costs["visa_compliance_fee_micro"], costs["mastercard_compliance_fee_micro"]) == (
        0,
        400_000_000,
    )
    assert costs["contest_lost_micro"] == -(100_000_000 + 1_000_000 + 20_000_000 + 400_000_000)
    assert costs["break_even"] == "21/26"  # (20 + 400) / (100 + 20 + 400)


@pytest.mark.parametrize(
    ("amount", "compliance"),
    [
        (1, None),
        (1, "visa_compliance"),
        (10_000, None),
        (99_999_999, "visa_compliance"),
        (99_999_999, "mastercard_compliance"),
        (5_000_000_000, None),
    ],
)
def test_the_break_even_is_exact(amount: int, compliance: str | None) -> None:
    """At the break-even chance of winning, contesting and accepting are worth exactly the same:
    p * won + (1 - p) * lost == accept, in exact fractions."""
    costs = posture_costs(
        amount_micro=amount, currency="usd", compliance=compliance, own_record=None
    )
    numerator, denominator = (int(part) for part in costs["break_even"].split("/"))
    p = Fraction(numerator, denominator)
    assert (
        p * costs["contest_won_micro"] + (1 - p) * costs["contest_lost_micro"]
        == costs["accept_micro"]
    )
    at_risk = 15_000_000 + (500_000_000 if compliance is not None else 0)
    assert p == Fraction(at_risk, amount + at_risk)
    assert costs["break_even_decimal"] == f"{p.numerator / p.denominator:.6f}"


def test_a_record_with_nothing_decided_has_no_rate() -> None:
    costs = posture_costs(
        amount_micro=30_000_000, currency="usd", compliance=None, own_record=WinRecord(0, 0)
    )
    assert costs["own_record"] == {
        "won": 0,
        "decided": 0,
        "win_rate": None,
        "wilson_low": None,
        "wilson_high": None,
    }
    assert costs["break_even"] == "1/3"
    assert costs["verdict"] == (
        "Contesting pays when you win more than 33.3% of such disputes; "
        "you have no decided dispute of this reason yet. Advice only."
    )


def test_a_perfect_record_reads_to_one_hundred_percent() -> None:
    costs = posture_costs(
        amount_micro=135_000_000, currency="usd", compliance=None, own_record=WinRecord(10, 10)
    )
    assert costs["break_even"] == "1/10"
    assert costs["own_record"]["wilson_high"] == "1.000000"
    assert costs["verdict"] == (
        "Contesting pays when you win more than 10.0% of such disputes; "
        "you have won 10 of 10 (95% interval 72.2\u2013100.0%). Advice only."
    )


@pytest.mark.parametrize("amount", [0, -1, 1.5, True, "100"])
def test_the_amount_at_stake_is_a_positive_integer(amount: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        posture_costs(amount_micro=amount, currency="usd", compliance=None, own_record=None)
    assert refused.value.code == "validation_error"
    assert refused.value.message == "amount_micro must be a positive integer of micro-dollars."


@pytest.mark.parametrize(
    ("rate", "rate_shown", "percent_shown"),
    [
        (0.0, "0.000000", "0.0"),
        (1.0, "1.000000", "100.0"),
        (0.2365930905, "0.236593", "23.7"),
        (0.0004999, "0.000500", "0.0"),
        (0.00125, "0.001250", "0.1"),
    ],
)
def test_rates_are_rounded_only_to_be_shown(
    rate: float, rate_shown: str, percent_shown: str
) -> None:
    assert rate_text(rate) == rate_shown
    assert percent_text(rate) == percent_shown


def test_a_fraction_is_shown_as_a_percentage_exactly() -> None:
    assert percent_text(Fraction(1, 3)) == "33.3"
    assert percent_text(Fraction(2, 3)) == "66.7"
    assert percent_text(Fraction(1, 2000)) == "0.0"  # half-even: 0.05 rounds to 0.0
    assert percent_text(Fraction(3, 2000)) == "0.2"  # and 0.15 to 0.2
