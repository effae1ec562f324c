"""What wins (SPEC §17): the outcome figures of decided disputes, per reason and month (a selector).

A dispute counts once it is decided: the provider's status is `won` or `lost` and Vouch has seen
when (`decided_at`, whose UTC month it is counted in; an appeal's decision moves it). Per reason
(the provider's `reason`) and month:

- `decided`, `won`, `lost`, and `accepted`: lost without a fight (no packet of it ever reached
  the provider, or may have: `FILING_HOLDS`). An accepted dispute is decided and lost too.
- the win rate, won ÷ decided with nothing excluded, and its 95% Wilson score interval (none for
  nothing decided);
- `recovered_micro`, the amounts of the won disputes; `fees_micro`, the fees they paid
  (`disputes.fees.fees_paid`): Stripe's, from the dispute's balance transactions, where it shows
  them, the fee table's otherwise; `net_recovery_micro`, recovered minus fees.

Totals per reason (every month) and overall; the CSV carries the same rows, money as exact dollars.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import cast

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from core.exceptions import InvalidInput
from disputes.fees import WinRecord, fees_paid, rate_text
from disputes.models import FILING_HOLDS, Dispute, Packet

DECIDED = ("won", "lost")
WON = "won"
ALL = "all"  # the month (or reason) of a total row
# ASCII digits only (`\d` takes any Unicode digit, and int() reads "٢٠٢٦" as 2026), from year
# 0001: a datetime holds no year 0 (issue 38, item 5).
MONTH = re.compile(r"\A(?!0000)([0-9]{4})-(0[1-9]|1[0-2])\Z")
CSV_HEADER = (
    "reason",
    "month",
    "decided",
    "won",
    "lost",
    "accepted_without_fight",
    "win_rate",
    "wilson_low",
    "wilson_high",
    "recovered_usd",
    "fees_usd",
    "net_recovery_usd",
)


@dataclass
class OutcomeRow:
    """The figures of one reason in one month (`month` is `all` in a total, `reason` too in the
    overall one). Money in integer micro-dollars."""

    reason: str
    month: str
    decided: int = 0
    won: int = 0
    lost: int = 0
    accepted: int = 0
    recovered_micro: int = 0
    fees_micro: int = 0

    @property
    def net_recovery_micro(self) -> int:
        return self.recovered_micro - self.fees_micro

    @property
    def record(self) -> WinRecord:
        return WinRecord(won=self.won, decided=self.decided)

    @property
    def win_rate(self) -> float | None:
        """won ÷ decided; None when nothing was decided."""
        return self.record.rate

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% Wilson score interval of the win rate; None when nothing was decided."""
        return self.record.interval

    def add(self, other: OutcomeRow) -> None:
        self.decided += other.decided
        self.won += other.won
        self.lost += other.lost
        self.accepted += other.accepted
        self.recovered_micro += other.recovered_micro
        self.fees_micro += other.fees_micro


@dataclass(frozen=True)
class Outcomes:
    """`rows` per reason and month, ordered by (reason, month); `reasons`, each reason's total
    over every month, ordered by reason; `total`, everything."""

    rows: list[OutcomeRow]
    reasons: list[OutcomeRow]
    total: OutcomeRow


def month_start(month: str) -> datetime:
    """The first instant (UTC) of a `YYYY-MM` month; `validation_error` for anything else."""
    match = MONTH.match(month)
    if match is None:
        raise InvalidInput(f"A month is written YYYY-MM (2026-11), not {month!r}.")
    return datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC)


def _month_after(month: str) -> datetime | None:
    """The first instant after `month`; None after 9999-12, past what a datetime holds (up to the
    end of that month is up to no end at all)."""
    start = month_start(month)
    if start.month < 12:
        return start.replace(month=start.month + 1)
    return None if start.year == 9999 else start.replace(year=start.year + 1, month=1)


def decided_disputes(
    *, from_month: str | None = None, to_month: str | None = None
) -> QuerySet[Dispute]:
    """The decided disputes (won or lost, `decided_at` set) whose UTC month of decision lies
    within the bounds (each optional, `YYYY-MM`, inclusive), each annotated `contested`: one of
    its packets reached the provider, or may have."""
    disputes = Dispute.objects.filter(provider_status__in=DECIDED, decided_at__isnull=False)
    if from_month:
        disputes = disputes.filter(decided_at__gte=month_start(from_month))
    end = _month_after(to_month) if to_month else None
    if end is not None:
        disputes = disputes.filter(decided_at__lt=end)
    held = Packet.objects.filter(dispute=OuterRef("pk"), filing_status__in=FILING_HOLDS)
    return disputes.annotate(contested=Exists(held))


def dispute_outcomes(*, from_month: str | None = None, to_month: str | None = None) -> Outcomes:
    """The outcome figures of the disputes decided within the bounds (`decided_disputes`): one
    query, summed in Python with the fee table's rules."""
    by_month: dict[tuple[str, str], OutcomeRow] = {}
    for dispute in decided_disputes(from_month=from_month, to_month=to_month):
        month = f"{cast(datetime, dispute.decided_at).astimezone(UTC):%Y-%m}"  # set: filtered
        won = dispute.provider_status == WON
        contested = bool(dispute.contested)  # type: ignore[attr-defined]
        one = OutcomeRow(
            reason=dispute.reason,
            month=month,
            decided=1,
            won=int(won),
            lost=int(not won),
            accepted=int(not won and not contested),
            recovered_micro=dispute.amount_micro if won else 0,
            fees_micro=fees_paid(dispute, contested),
        )
        by_month.setdefault((dispute.reason, month), OutcomeRow(dispute.reason, month)).add(one)
    rows = [by_month[key] for key in sorted(by_month)]
    reasons: dict[str, OutcomeRow] = {}
    total = OutcomeRow(reason=ALL, month=ALL)
    for row in rows:
        reasons.setdefault(row.reason, OutcomeRow(row.reason, ALL)).add(row)
        total.add(row)
    return Outcomes(rows=rows, reasons=list(reasons.values()), total=total)


def win_record(reason: str) -> WinRecord:
    """How many decided disputes of this reason were won, of how many decided (every month; an
    accepted one is decided and lost), for the fee table's `posture_costs`."""
    counts = Dispute.objects.filter(
        reason=reason, provider_status__in=DECIDED, decided_at__isnull=False
    ).aggregate(decided=Count("pk"), won=Count("pk", filter=Q(provider_status=WON)))
    return WinRecord(won=counts["won"], decided=counts["decided"])


def usd_text(micro: int) -> str:
    """Micro-dollars as exact dollars with six places (`-15.000000`), never through a float."""
    return f"{Decimal(micro).scaleb(-6):.6f}"


def csv_row(row: OutcomeRow) -> list[str]:
    interval = row.interval
    rate = row.win_rate
    return [
        row.reason,
        row.month,
        str(row.decided),
        str(row.won),
        str(row.lost),
        str(row.accepted),
        "" if rate is None else rate_text(rate),
        "" if interval is None else rate_text(interval[0]),
        "" if interval is None else rate_text(interval[1]),
        usd_text(row.recovered_micro),
        usd_text(row.fees_micro),
        usd_text(row.net_recovery_micro),
    ]


def outcomes_csv(outcomes: Outcomes) -> str:
    """The figures as CSV: the header, each reason's months (reason, month order), each reason's
    total (month `all`), then the overall total (reason and month `all`). Rates as decimals of six
    places (empty when nothing was decided), money as exact dollars of six places."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for row in (*outcomes.rows, *outcomes.reasons, outcomes.total):
        writer.writerow(csv_row(row))
    return out.getvalue()
