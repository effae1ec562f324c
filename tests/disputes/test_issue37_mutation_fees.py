"""Issue 37's mutation round for disputes/fees.py (bench/MUTATION.md): the fees a dispute paid are
those Stripe's balance transactions show (`Dispute.provider_fees_micro`, SPEC §18) wherever it
shows any, none included; the fee table only where it shows none. No database: disputes are built
in memory."""

from __future__ import annotations

import pytest

from disputes.fees import fees_paid
from disputes.models import Dispute


def dispute(status: str, provider_fees_micro: int | None) -> Dispute:
    return Dispute(
        amount_micro=10_000_000,
        currency="usd",
        reason="fraudulent",
        provider_status=status,
        enhanced_eligibility_types=["visa_compliance"],
        provider_fees_micro=provider_fees_micro,
    )


@pytest.mark.parametrize("contested", [True, False])
@pytest.mark.parametrize("fees", [15_000_000, 1, 0])
def test_the_fees_stripe_shows_are_the_fees_paid_whatever_the_table_says(
    contested: bool, fees: int
) -> None:
    assert fees_paid(dispute("lost", fees), contested) == fees


def test_where_stripe_shows_no_fees_the_table_says_them() -> None:
    # The default table: dispute fee + lost-dispute fee + Visa's compliance fee, contested and lost.
    assert fees_paid(dispute("lost", None), True) == 15_000_000 + 15_000_000 + 500_000_000
