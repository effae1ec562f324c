"""The outcome figures (SPEC §17, disputes/outcomes.py): per reason and UTC month of decision,
decided, won, lost and accepted without a fight (decided and lost too), the win rate with nothing
excluded and its 95% Wilson interval, the fees the fee table charges and the net recovery; totals;
the month bounds; the CSV byte for byte. Rows are made directly: these are figures, not flows."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from core.exceptions import InvalidInput
from disputes.fees import WinRecord, wilson_interval
from disputes.models import Dispute, DisputeSource, FilingStatus, Packet, PacketStatus, Posture
from disputes.outcomes import (
    CSV_HEADER,
    OutcomeRow,
    decided_disputes,
    dispute_outcomes,
    month_start,
    outcomes_csv,
    usd_text,
    win_record,
)

Z = 1.959963984540054
# Distinct fees, so that one taken for another shows.
FEES = {
    "usd": {
        "dispute_fee": 1_000_000,
        "lost_dispute_fee": 20_000_000,
        "visa_compliance_fee": 300_000_000,
        "mastercard_compliance_fee": 400_000_000,
    }
}


def closed_form(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval as textbooks write it, independently of the module."""
    p = k / n
    root = Z * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return (
        (p + Z**2 / (2 * n) - root) / (1 + Z**2 / n),
        (p + Z**2 / (2 * n) + root) / (1 + Z**2 / n),
    )


_seq = iter(range(1, 1_000_000))


def dispute(
    *,
    status: str,
    at: datetime | None,
    reason: str = "fraudulent",
    amount: int = 10_000_000,
    filing: str | None = None,
    types: Any = (),
) -> Dispute:
    """A dispute the provider decided (`status`) at `at`, with one packet in `filing` if given."""
    n = next(_seq)
    row = Dispute.objects.create(
        provider_dispute_id=f"dp_out_{n}",
        charge_id=f"ch_out_{n}",
        amount_micro=amount,
        reason=reason,
        provider_status=status,
        decided_at=at,
        enhanced_eligibility_types=list(types),
        source=DisputeSource.STAFF,
    )
    if filing is not None:
        Packet.objects.create(
            dispute=row,
            version=1,
            drafter="test",
            posture=Posture.CONTEST,
            summary="The buyer received the goods.",
            digest="0" * 64,
            status=PacketStatus.READY_FOR_REVIEW,
            filing_status=filing,
            filing_key="" if filing == FilingStatus.NOT_FILED else f"pkt:out:{n}",
        )
    return row


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def figures(row: OutcomeRow) -> tuple[Any, ...]:
    return (
        row.reason,
        row.month,
        row.decided,
        row.won,
        row.lost,
        row.accepted,
        row.recovered_micro,
        row.fees_micro,
        row.net_recovery_micro,
    )


# --- the Wilson interval -----------------------------------------------------------------------


def test_no_decided_dispute_has_no_rate_and_no_interval() -> None:
    assert wilson_interval(0, 0) is None
    assert WinRecord(won=0, decided=0).rate is None
    assert WinRecord(won=0, decided=0).interval is None
    assert OutcomeRow("general", "2026-11").win_rate is None


@pytest.mark.parametrize(
    ("won", "decided", "low", "high"),
    [
        (5, 10, 0.2365930905, 0.7634069095),
        (0, 5, 0.0, 0.4344824648),
        (10, 10, 0.7224672001, 1.0),
        (1, 1, 0.2065493144, 1.0),
    ],
)
def test_the_wilson_interval_of_known_values(
    won: int, decided: int, low: float, high: float
) -> None:
    interval = wilson_interval(won, decided)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=1e-10)
    assert interval[1] == pytest.approx(high, abs=1e-10)


def test_the_wilson_interval_ends_exactly_at_zero_and_one() -> None:
    assert wilson_interval(0, 5) == (0.0, pytest.approx(0.4344824648, abs=1e-10))
    assert wilson_interval(0, 5)[0] == 0.0  # type: ignore[index]
    assert wilson_interval(10, 10)[1] == 1.0  # type: ignore[index]


@pytest.mark.parametrize(("won", "decided"), [(81, 263), (1, 2), (3, 7), (99, 100), (1, 1000)])
def test_the_wilson_interval_matches_the_closed_form(won: int, decided: int) -> None:
    low, high = wilson_interval(won, decided)  # type: ignore[misc]
    expected_low, expected_high = closed_form(won, decided)
    assert abs(low - expected_low) < 1e-12
    assert abs(high - expected_high) < 1e-12
    assert WinRecord(won=won, decided=decided).interval == (low, high)
    assert WinRecord(won=won, decided=decided).rate == won / decided


def test_81_of_263() -> None:
    low, high = wilson_interval(81, 263)  # type: ignore[misc]
    assert (round(low, 6), round(high, 6)) == (0.255289, 0.366210)


@pytest.mark.parametrize(("won", "decided"), [(-1, 5), (6, 5)])
def test_more_won_than_decided_is_refused(won: int, decided: int) -> None:
    with pytest.raises(ValueError, match="must lie within"):
        wilson_interval(won, decided)


# --- months ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["2026-13", "2026-00", "2026-1", "26-01", "2026-01-01", "x", " 2026-01"]
)
def test_a_month_is_written_yyyy_mm(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        month_start(text)
    assert refused.value.code == "validation_error"
    assert "YYYY-MM" in refused.value.message


def test_a_month_starts_at_midnight_utc() -> None:
    assert month_start("2026-02") == datetime(2026, 2, 1, tzinfo=UTC)
    assert month_start("2026-12") == datetime(2026, 12, 1, tzinfo=UTC)


# --- the figures ------------------------------------------------------------------------------


@pytest.mark.django_db
@override_settings(DISPUTE_FEES=FEES)
def test_known_disputes_give_exact_figures() -> None:
    # fraudulent, 2026-10: won contested, won accepted-looking (no packet), lost contested with the
    # Visa compliance fee, lost after a packet that never reached the provider (accepted).
    dispute(status="won", at=at("2026-10-03T10:00"), amount=40_000_000, filing=FilingStatus.FILED)
    dispute(status="won", at=at("2026-10-04T10:00"), amount=7_000_000)
    dispute(
        status="lost",
        at=at("2026-10-05T10:00"),
        amount=9_000_000,
        filing=FilingStatus.READBACK_FAILED,
        types=["visa_compliance"],
    )
    dispute(status="lost", at=at("2026-10-06T10:00"), filing=FilingStatus.NOT_SUBMITTED)
    # fraudulent, 2026-11: lost uncontested though compliance-eligible (no fee but the dispute's).
    dispute(status="lost", at=at("2026-11-02T10:00"), types=["visa_compliance"])
    # duplicate, 2026-11: lost while awaiting readback, and one submitting; one won.
    dispute(
        status="lost",
        at=at("2026-11-09"),
        reason="duplicate",
        filing=FilingStatus.AWAITING_READBACK,
    )
    dispute(status="lost", at=at("2026-11-10"), reason="duplicate", filing=FilingStatus.SUBMITTING)
    dispute(status="won", at=at("2026-11-11"), reason="duplicate", amount=3_000_000)
    # Not decided: still open, or decided with no moment seen, or a warning.
    dispute(status="needs_response", at=None)
    dispute(status="under_review", at=at("2026-11-12"))
    dispute(status="won", at=None)
    dispute(status="warning_closed", at=at("2026-11-13"))

    outcomes = dispute_outcomes()

    assert [figures(r) for r in outcomes.rows] == [
        (
            "duplicate",
            "2026-11",
            3,
            1,
            2,
            0,
            3_000_000,
            3 * 1_000_000 + 2 * 20_000_000,
            -40_000_000,
        ),
        (
            "fraudulent",
            "2026-10",
            4,
            2,
            2,
            1,
            47_000_000,
            4_000_000 + 20_000_000 + 300_000_000,
            -277_000_000,
        ),
        ("fraudulent", "2026-11", 1, 0, 1, 1, 0, 1_000_000, -1_000_000),
    ]
    assert [figures(r) for r in outcomes.reasons] == [
        ("duplicate", "all", 3, 1, 2, 0, 3_000_000, 43_000_000, -40_000_000),
        ("fraudulent", "all", 5, 2, 3, 2, 47_000_000, 325_000_000, -278_000_000),
    ]
    assert figures(outcomes.total) == (
        "all",
        "all",
        8,
        3,
        5,
        2,
        50_000_000,
        368_000_000,
        -318_000_000,
    )
    assert outcomes.rows[1].win_rate == 0.5
    assert outcomes.rows[1].interval == wilson_interval(2, 4)
    assert outcomes.reasons[1].win_rate == 0.4
    assert outcomes.total.interval == wilson_interval(3, 8)


@pytest.mark.django_db
def test_accepted_disputes_count_as_decided_and_lost_in_the_win_rate() -> None:
    dispute(status="won", at=at("2026-09-01"), filing=FilingStatus.FILED)
    dispute(status="lost", at=at("2026-09-02"))
    dispute(status="lost", at=at("2026-09-03"))
    dispute(status="lost", at=at("2026-09-04"), filing=FilingStatus.NOT_FILED)

    [row] = dispute_outcomes().rows

    assert (row.decided, row.won, row.lost, row.accepted) == (4, 1, 3, 3)
    assert row.win_rate == 0.25
    assert row.interval == wilson_interval(1, 4)
    assert win_record("fraudulent") == WinRecord(won=1, decided=4)


@pytest.mark.django_db
def test_the_default_fee_table_charges_stripe_us_fees() -> None:
    dispute(status="won", at=at("2026-09-01"), amount=20_000_000, filing=FilingStatus.FILED)
    dispute(status="lost", at=at("2026-09-02"))
    dispute(status="lost", at=at("2026-09-03"), filing=FilingStatus.FILED)
    dispute(
        status="lost", at=at("2026-09-04"), filing=FilingStatus.FILED, types=["visa_compliance"]
    )

    total = dispute_outcomes().total

    assert total.fees_micro == 4 * 15_000_000 + 2 * 15_000_000 + 500_000_000
    assert total.recovered_micro == 20_000_000
    assert total.net_recovery_micro == 20_000_000 - 590_000_000


@pytest.mark.django_db
def test_the_month_boundary_is_utc_midnight() -> None:
    last = datetime(2026, 10, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    dispute(status="won", at=last)
    dispute(status="lost", at=last + timedelta(milliseconds=1))
    # 01:30 on 1 November in Berlin is still October in UTC.
    dispute(status="lost", at=datetime.fromisoformat("2026-11-01T00:30:00+01:00"))

    rows = dispute_outcomes().rows

    assert [(r.month, r.decided, r.won, r.lost) for r in rows] == [
        ("2026-10", 2, 1, 1),
        ("2026-11", 1, 0, 1),
    ]
    assert [r.month for r in dispute_outcomes(to_month="2026-10").rows] == ["2026-10"]
    assert [r.decided for r in dispute_outcomes(to_month="2026-10").rows] == [2]
    assert [r.decided for r in dispute_outcomes(from_month="2026-11").rows] == [1]


@pytest.mark.django_db
def test_the_month_bounds_are_inclusive() -> None:
    for day in (
        "2025-11-30T23:59:59",
        "2025-12-01",
        "2025-12-31T23:59:59",
        "2026-01-01",
        "2026-02-01",
    ):
        dispute(status="won", at=at(day))

    def months(**bounds: str) -> list[tuple[str, int]]:
        return [(r.month, r.decided) for r in dispute_outcomes(**bounds).rows]

    assert months(from_month="2025-12", to_month="2025-12") == [("2025-12", 2)]
    assert months(from_month="2025-12", to_month="2026-01") == [("2025-12", 2), ("2026-01", 1)]
    assert months(to_month="2025-11") == [("2025-11", 1)]
    assert months(from_month="2026-01") == [("2026-01", 1), ("2026-02", 1)]
    assert months(from_month="", to_month="") == months()
    assert len(months()) == 4
    assert decided_disputes(from_month="2026-02").count() == 1
    with pytest.raises(InvalidInput):
        dispute_outcomes(from_month="2026-1")
    with pytest.raises(InvalidInput):
        dispute_outcomes(to_month="december")


@pytest.mark.django_db
def test_a_dispute_is_contested_when_a_packet_may_have_reached_the_provider() -> None:
    for filing in FilingStatus.values:
        dispute(status="lost", at=at("2026-09-01"), reason=filing, filing=filing)
    dispute(status="lost", at=at("2026-09-01"), reason="none")

    contested = {d.reason: d.contested for d in decided_disputes()}  # type: ignore[attr-defined]
    accepted = {r.reason: r.accepted for r in dispute_outcomes().rows}

    holds = {"submitting", "awaiting_readback", "filed", "readback_failed"}
    assert contested == {reason: reason in holds for reason in [*FilingStatus.values, "none"]}
    assert accepted == {
        reason: int(reason not in holds) for reason in [*FilingStatus.values, "none"]
    }


@pytest.mark.django_db
def test_no_decided_dispute_gives_no_rows_and_an_empty_total() -> None:
    dispute(status="needs_response", at=None)
    outcomes = dispute_outcomes()
    assert outcomes.rows == []
    assert outcomes.reasons == []
    assert figures(outcomes.total) == ("all", "all", 0, 0, 0, 0, 0, 0, 0)
    assert outcomes.total.win_rate is None
    assert outcomes.total.interval is None
    assert (
        outcomes_csv(outcomes)
        == ",".join(CSV_HEADER) + "\r\nall,all,0,0,0,0,,,,0.000000,0.000000,0.000000\r\n"
    )


@pytest.mark.django_db
def test_win_record_counts_every_month_of_one_reason() -> None:
    dispute(status="won", at=at("2026-01-05"), reason="general")
    dispute(status="won", at=at("2026-06-05"), reason="general", filing=FilingStatus.FILED)
    dispute(status="lost", at=at("2026-07-05"), reason="general")
    dispute(status="won", at=at("2026-07-05"), reason="duplicate")
    dispute(status="won", at=None, reason="general")
    dispute(status="under_review", at=at("2026-07-05"), reason="general")

    assert win_record("general") == WinRecord(won=2, decided=3)
    assert win_record("duplicate") == WinRecord(won=1, decided=1)
    assert win_record("noncompliant") == WinRecord(won=0, decided=0)


# --- CSV ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("micro", "text"),
    [
        (0, "0.000000"),
        (1, "0.000001"),
        (15_000_000, "15.000000"),
        (-318_000_001, "-318.000001"),
        (123_456_789_012_345_678, "123456789012.345678"),
    ],
)
def test_money_is_exact_dollars_with_six_places(micro: int, text: str) -> None:
    assert usd_text(micro) == text


@pytest.mark.django_db
@override_settings(DISPUTE_FEES=FEES)
def test_the_csv_bytes() -> None:
    for n in range(5):
        dispute(
            status="won" if n < 2 else "lost",
            at=at("2026-10-02"),
            amount=12_345_678,
            filing=FilingStatus.FILED,
        )
    dispute(status="lost", at=at("2026-11-02"), reason="duplicate", amount=1_000_001)

    text = outcomes_csv(dispute_outcomes())

    assert text.encode() == (
        b"reason,month,decided,won,lost,accepted_without_fight,win_rate,wilson_low,wilson_high,"
        b"recovered_usd,fees_usd,net_recovery_usd\r\n"
        b"duplicate,2026-11,1,0,1,1,0.000000,0.000000,0.793451,0.000000,1.000000,-1.000000\r\n"
        b"fraudulent,2026-10,5,2,3,0,0.400000,0.117621,0.769276,24.691356,65.000000,-40.308644\r\n"
        b"duplicate,all,1,0,1,1,0.000000,0.000000,0.793451,0.000000,1.000000,-1.000000\r\n"
        b"fraudulent,all,5,2,3,0,0.400000,0.117621,0.769276,24.691356,65.000000,-40.308644\r\n"
        b"all,all,6,2,4,1,0.333333,0.096771,0.700007,24.691356,66.000000,-41.308644\r\n"
    )
