"""What fighting a dispute costs (SPEC §17): the fee table, the fees a dispute has paid, and the
cost of each posture for a packet to show.

The table is `settings.DISPUTE_FEES`, per currency, in integer micro-dollars:

- `dispute_fee`: charged when any dispute opens, whatever happens next;
- `lost_dispute_fee`: the countering fee, kept by the provider when a contested dispute is lost;
- `visa_compliance_fee`: the network's fee to counter a Visa compliance dispute, kept when it is
  lost;
- `mastercard_compliance_fee`: the same for a Mastercard compliance dispute (Stripe collects 500
  USD, or the local equivalent, and refunds it if the dispute is won:
  https://docs.stripe.com/disputes/api/mastercard-compliance).

Money stays integer micro-dollars; the break-even win probability is an exact fraction. Rates
(a win rate, its Wilson interval) are numbers, rounded only where they are shown. Nothing here
decides a posture: `posture_costs` gives the figures and an advisory sentence; a person decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.exceptions import InvalidInput
from disputes.exceptions import UnsupportedCurrency
from disputes.models import Dispute
from disputes.packets import MASTERCARD_COMPLIANCE, VISA_COMPLIANCE, compliance_program

# The 95% two-sided normal quantile of the Wilson score interval.
Z_95 = 1.959963984540054
LOST = "lost"  # the provider's status of a lost dispute
RATE_PLACES = Decimal("0.000001")  # a rate shown as a decimal
PERCENT_PLACES = Decimal("0.1")  # a rate shown as a percentage


class DisputeFeesUnknownCurrency(UnsupportedCurrency):
    """A dispute in a currency the fee table (DISPUTE_FEES) has no row for."""

    code = "dispute_fees_unknown_currency"
    default_message = "The dispute fee table (DISPUTE_FEES) has no row for this currency."


@dataclass(frozen=True)
class FeeTable:
    """One currency's row of the fee table, in integer micro-dollars."""

    currency: str
    dispute_fee: int
    lost_dispute_fee: int
    visa_compliance_fee: int
    mastercard_compliance_fee: int

    def compliance_fee(self, program: str | None) -> int:
        """The network's fee of a compliance program (`visa_compliance`,
        `mastercard_compliance`); 0 for none."""
        if program == VISA_COMPLIANCE:
            return self.visa_compliance_fee
        if program == MASTERCARD_COMPLIANCE:
            return self.mastercard_compliance_fee
        return 0


@dataclass(frozen=True)
class WinRecord:
    """How many disputes (of one reason) were won, of how many decided."""

    won: int
    decided: int

    @property
    def rate(self) -> float | None:
        """won ÷ decided; None when nothing was decided."""
        return self.won / self.decided if self.decided else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% Wilson score interval of the rate; None when nothing was decided."""
        return wilson_interval(self.won, self.decided)


def wilson_interval(won: int, decided: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval (low, high) of `won` successes in `decided` trials, within
    [0, 1]; None for no trials (no rate, no interval)."""
    if decided == 0:
        return None
    if not 0 <= won <= decided:
        raise ValueError(f"won ({won}) must lie within 0..decided ({decided})")
    n = decided
    p = won / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At the ends the bounds are 0 and 1 exactly; the float arithmetic misses them by an ulp.
    low = 0.0 if won == 0 else centre - half
    high = 1.0 if won == n else centre + half
    return low, high


def fee_table(currency: str) -> FeeTable:
    """The fee table's row for `currency` (any case); `dispute_fees_unknown_currency` when the
    table has none, ImproperlyConfigured when a fee is not a non-negative integer."""
    key = currency.lower()
    row = settings.DISPUTE_FEES.get(key)
    if row is None:
        raise DisputeFeesUnknownCurrency(
            f"The dispute fee table (DISPUTE_FEES) has no row for {currency!r}."
        )
    return FeeTable(
        currency=key,
        dispute_fee=_fee(row, key, "dispute_fee"),
        lost_dispute_fee=_fee(row, key, "lost_dispute_fee"),
        visa_compliance_fee=_fee(row, key, "visa_compliance_fee"),
        mastercard_compliance_fee=_fee(row, key, "mastercard_compliance_fee"),
    )


def _fee(row: dict[str, Any], currency: str, name: str) -> int:
    value = row.get(name)
    if type(value) is not int or value < 0:
        raise ImproperlyConfigured(
            f"DISPUTE_FEES[{currency!r}][{name!r}] must be a non-negative integer of "
            f"micro-dollars, not {value!r}."
        )
    return value


def is_visa_compliance(dispute: Dispute) -> bool:
    """Whether the provider says the dispute is a Visa compliance dispute."""
    types = dispute.enhanced_eligibility_types
    return isinstance(types, list) and VISA_COMPLIANCE in types


def fees_paid(dispute: Dispute, contested: bool) -> int:
    """The fees the dispute has cost, in micro-dollars: those Stripe's balance transactions of the
    dispute show (`Dispute.provider_fees_micro`, SPEC §18) where it shows any; otherwise by the
    fee table: the dispute fee always; when it was contested (a response was, or may have been,
    submitted) and lost, the lost-dispute fee too, and the network's compliance fee when it is a
    Visa or Mastercard compliance dispute."""
    if dispute.provider_fees_micro is not None:
        return int(dispute.provider_fees_micro)
    table = fee_table(dispute.currency)
    paid = table.dispute_fee
    if contested and dispute.provider_status == LOST:
        paid += table.lost_dispute_fee + table.compliance_fee(compliance_program(dispute))
    return paid


def rate_text(rate: float) -> str:
    """A rate as a decimal string of six places (`0.236593`)."""
    return str(Decimal(rate).quantize(RATE_PLACES, rounding=ROUND_HALF_EVEN))


def percent_text(rate: Fraction | float) -> str:
    """A rate as a percentage of one decimal place, without the sign (`23.7`)."""
    if isinstance(rate, Fraction):
        value = Decimal(rate.numerator) / Decimal(rate.denominator)
    else:
        value = Decimal(rate)
    return str((value * 100).quantize(PERCENT_PLACES, rounding=ROUND_HALF_EVEN))


def _record(record: WinRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    interval = record.interval
    rate = record.rate
    return {
        "won": record.won,
        "decided": record.decided,
        "win_rate": None if rate is None else rate_text(rate),
        "wilson_low": None if interval is None else rate_text(interval[0]),
        "wilson_high": None if interval is None else rate_text(interval[1]),
    }


def _verdict(break_even: Fraction, record: WinRecord | None) -> str:
    first = f"Contesting pays when you win more than {percent_text(break_even)}% of such disputes"
    if record is None or (interval := record.interval) is None:
        return f"{first}; you have no decided dispute of this reason yet. Advice only."
    low, high = interval
    return (
        f"{first}; you have won {record.won} of {record.decided} "
        f"(95% interval {percent_text(low)}\u2013{percent_text(high)}%). Advice only."
    )


def posture_costs(
    *, amount_micro: int, currency: str, compliance: str | None, own_record: WinRecord | None
) -> dict[str, Any]:
    """What accepting and contesting a dispute of `amount_micro` would cost, from the fee table.

    Every amount is integer micro-dollars, an outcome negative as a loss:
    accepting loses the amount and the dispute fee; contesting and winning loses the dispute fee;
    contesting and losing loses the amount, the dispute fee, the lost-dispute fee and (for a
    compliance dispute, `compliance` naming its program: `visa_compliance`,
    `mastercard_compliance`) the network's compliance fee. Contesting pays in
    expectation when the chance of winning exceeds the break-even (L + C) / (A + L + C), given as
    an exact fraction (`break_even`, "n/d") and as a decimal of six places for reading. With
    `own_record`, the merchant's own wins of this reason and the 95% Wilson interval of its rate.
    `verdict` is a sentence of advice only. Every value is an int, a bool, a string or None."""
    if type(amount_micro) is not int or amount_micro <= 0:
        raise InvalidInput("amount_micro must be a positive integer of micro-dollars.")
    table = fee_table(currency)
    compliance_fee = table.compliance_fee(compliance)
    at_risk = table.lost_dispute_fee + compliance_fee
    break_even = Fraction(at_risk, amount_micro + at_risk)
    return {
        "currency": table.currency,
        "amount_micro": amount_micro,
        "dispute_fee_micro": table.dispute_fee,
        "lost_dispute_fee_micro": table.lost_dispute_fee,
        "compliance": compliance is not None,
        "visa_compliance_fee_micro": compliance_fee if compliance == VISA_COMPLIANCE else 0,
        "mastercard_compliance_fee_micro": (
            compliance_fee if compliance == MASTERCARD_COMPLIANCE else 0
        ),
        "accept_micro": -(amount_micro + table.dispute_fee),
        "contest_won_micro": -table.dispute_fee,
        "contest_lost_micro": -(amount_micro + table.dispute_fee + at_risk),
        "break_even": f"{break_even.numerator}/{break_even.denominator}",
        "break_even_decimal": str(
            (Decimal(break_even.numerator) / Decimal(break_even.denominator)).quantize(
                RATE_PLACES, rounding=ROUND_HALF_EVEN
            )
        ),
        "own_record": _record(own_record),
        "verdict": _verdict(break_even, own_record),
    }


# --- presentation: the break-even as people read it ----------------------------------------------


def break_even_words(costs: dict[str, Any]) -> dict[str, str] | None:
    """A packet's break-even (`costs["break_even"]`, the exact fraction "n/d") as a sentence and a
    details line: "Contesting pays if you win more than 68% of such disputes." and "break-even
    win rate 15/22 (0.681818)". None when the costs hold none."""
    text = costs.get("break_even") if isinstance(costs, dict) else None
    if not isinstance(text, str) or "/" not in text:
        return None
    try:
        fraction = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    percent = Decimal(fraction.numerator) * 100 / Decimal(fraction.denominator)
    whole = percent.quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    # A whole percent, unless it would read as never (0%) or always (100%) when it is neither.
    shown = whole if 0 < whole < 100 or percent in (0, 100) else percent.quantize(PERCENT_PLACES)
    decimal = costs.get("break_even_decimal") or percent_text(fraction)
    return {
        "sentence": f"Contesting pays if you win more than {shown}% of such disputes.",
        "details": f"break-even win rate {fraction.numerator}/{fraction.denominator} ({decimal})",
    }
