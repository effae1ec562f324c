"""The ops console (SPEC §10, the admin's home page): what needs a person now, each a count that
links to the admin list showing exactly those rows, and two small charts of the last 30 days.

Reads only. `ops` is the top floor: it may read every app. Each count's query and its link's
filter say the same thing, so following a count never shows a different number; the lists'
filters are the ones their admins already allow (local-field lookups, `list_filter`, or the
envelopes admin's `stuck` filter, which calls the same selectors as this module)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, QuerySet
from django.db.models.functions import TruncDate
from django.urls import reverse
from django.utils import timezone

from disputes.models import Dispute
from disputes.selectors import (
    disputes_awaiting_response,
    packets_awaiting_approval,
    packets_awaiting_filing,
)
from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import funding_legs_stuck, refund_legs_stuck
from reconciliation.models import UNRESOLVED, Discrepancy, Severity
from verification.models import Escalation, EscalationStatus, Verdict, VerificationRun

CHART_DAYS = 30
NEXT_DISPUTES = 5
DECIDED_VERDICTS = (
    Verdict.VERIFIED,
    Verdict.CONTRADICTED,
    Verdict.FAILED,
    Verdict.UNVERIFIABLE,
)


@dataclass(frozen=True)
class Tile:
    """One thing a person may have to do: how many, and the list that shows them."""

    key: str
    label: str
    count: int
    url: str
    model: str  # `app_label.model_name` of the list it links to
    help: str = ""
    urgent: bool = False  # a non-zero count here is about money or a deadline


@dataclass(frozen=True)
class DisputeDue:
    dispute: Dispute
    url: str
    due_by: datetime
    time_left: timedelta

    @property
    def overdue(self) -> bool:
        return self.time_left <= timedelta(0)

    @property
    def time_left_text(self) -> str:
        return duration_text(self.time_left)


@dataclass(frozen=True)
class Series:
    name: str
    values: list[int]

    @property
    def total(self) -> int:
        return sum(self.values)


@dataclass(frozen=True)
class ChartData:
    """Per-day counts: `days` oldest first, each series one value per day."""

    days: list[date]
    series: list[Series]

    @property
    def total(self) -> int:
        return sum(series.total for series in self.series)


@dataclass(frozen=True)
class Console:
    now: datetime
    tiles: list[Tile]
    discrepancies: list[Tile]
    disputes_next: list[DisputeDue]
    verdicts: ChartData
    escalations: ChartData
    stuck_after_s: int = 0


def duration_text(delta: timedelta) -> str:
    """`2 d 3 h`, `5 h 12 min`, `40 min`; a negative delta reads `overdue 3 h`."""
    seconds = int(delta.total_seconds())
    prefix = "overdue " if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes = rest // 60
    if days:
        text = f"{days} d {hours} h"
    elif hours:
        text = f"{hours} h {minutes} min" if minutes else f"{hours} h"
    else:
        text = f"{minutes} min"
    return prefix + text


def _changelist(name: str, **query: str) -> str:
    url = reverse(f"admin:{name}_changelist")
    return f"{url}?{urlencode(query)}" if query else url


# --- the querysets behind each count (the links filter the same way) ---------------------------


def escalations_open() -> QuerySet[Escalation]:
    return Escalation.objects.open()


# The disputes and packets someone can act on are the disputes app's selectors
# (`disputes.selectors`), which the lists' `queue` filters call too.
def envelopes_with_stuck_funding(*, now: datetime) -> QuerySet[Envelope]:
    return Envelope.objects.filter(
        pk__in=funding_legs_stuck(now=now).values("envelope_id")
    ).distinct()


def refunds_with_stuck_legs(*, now: datetime) -> QuerySet[RefundOperation]:
    return RefundOperation.objects.filter(
        pk__in=refund_legs_stuck(now=now).values("operation_id")
    ).distinct()


def discrepancies_unresolved(severity: str) -> QuerySet[Discrepancy]:
    return Discrepancy.objects.unresolved().filter(severity=severity)


# --- the charts ---------------------------------------------------------------------------------


def chart_days(now: datetime, days: int = CHART_DAYS) -> list[date]:
    """The last `days` days, today (in the site's time zone) included, oldest first."""
    today = timezone.localdate(now)
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _per_day(rows: QuerySet[Any], days: list[date], key: str) -> dict[str, list[int]]:
    index = {day: i for i, day in enumerate(days)}
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * len(days))
    for row in rows:
        position = index.get(row["day"])
        if position is not None:
            counts[row[key]][position] += row["n"]
    return counts


def verdicts_per_day(*, now: datetime, days: int = CHART_DAYS) -> ChartData:
    """Decided verification runs per day of their verdict, one series per verdict."""
    span = chart_days(now, days)
    rows = (
        VerificationRun.objects.filter(
            verdict__in=DECIDED_VERDICTS, decided_at__gte=_day_start(span[0])
        )
        .annotate(day=TruncDate("decided_at"))
        .values("day", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = _per_day(rows, span, "verdict")
    return ChartData(
        days=span,
        series=[
            Series(str(verdict), counts.get(str(verdict), [0] * len(span)))
            for verdict in DECIDED_VERDICTS
        ],
    )


def escalations_per_day(*, now: datetime, days: int = CHART_DAYS) -> ChartData:
    """Escalations opened (by when they were opened) and resolved (by when) per day."""
    span = chart_days(now, days)
    start = _day_start(span[0])
    opened = (
        Escalation.objects.filter(created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    resolved = (
        Escalation.objects.filter(resolved_at__gte=start)
        .annotate(day=TruncDate("resolved_at"))
        .values("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    series = []
    for name, rows in (("opened", opened), ("resolved", resolved)):
        values = [0] * len(span)
        index = {day: i for i, day in enumerate(span)}
        for row in rows:
            if row["day"] in index:
                values[index[row["day"]]] += row["n"]
        series.append(Series(name, values))
    return ChartData(days=span, series=series)


# --- the console --------------------------------------------------------------------------------


def ops_console(*, now: datetime | None = None) -> Console:
    """Everything the admin's home page shows, read at `now` (default: the present)."""
    now = now or timezone.now()
    stuck_after_s = int(settings.RECONCILIATION_STUCK_AFTER_S)
    stuck_after = duration_text(timedelta(seconds=stuck_after_s))
    awaiting = disputes_awaiting_response()
    tiles = [
        Tile(
            key="escalations",
            label="Open escalations",
            count=escalations_open().count(),
            model="verification.escalation",
            url=_changelist("verification_escalation", status__exact=EscalationStatus.OPEN),
            help="Bad verdicts and legs the provider shows no trace of, oldest first.",
            urgent=True,
        ),
        Tile(
            key="disputes",
            label="Disputes awaiting a response",
            count=awaiting.count(),
            model="disputes.dispute",
            url=_changelist("disputes_dispute", queue="awaiting_response"),
            help="Stripe takes a response or an appeal from Vouch now; deadline first.",
            urgent=True,
        ),
        Tile(
            key="packets_approval",
            label="Packets awaiting approval",
            count=packets_awaiting_approval().count(),
            model="disputes.packet",
            url=_changelist("disputes_packet", queue="awaiting_approval"),
            help="Ready for review, not approved yet, and Stripe still takes them.",
        ),
        Tile(
            key="packets_filing",
            label="Packets awaiting filing",
            count=packets_awaiting_filing().count(),
            model="disputes.packet",
            url=_changelist("disputes_packet", queue="awaiting_filing"),
            help="Approved, not filed, and Stripe still takes them.",
        ),
        Tile(
            key="stuck_funding",
            label="Envelopes with a stuck funding leg",
            count=envelopes_with_stuck_funding(now=now).count(),
            model="envelopes.envelope",
            url=_changelist("envelopes_envelope", stuck="funding"),
            help=f"A funding charge pending for over {stuck_after}.",
            urgent=True,
        ),
        Tile(
            key="stuck_refund",
            label="Refunds with a stuck leg",
            count=refunds_with_stuck_legs(now=now).count(),
            model="envelopes.refundoperation",
            url=_changelist("envelopes_refundoperation", stuck="yes"),
            help=f"A refund leg reserved or unknown for over {stuck_after}.",
            urgent=True,
        ),
    ]
    discrepancies = [
        Tile(
            key=f"discrepancies_{severity}",
            label=f"{str(severity).capitalize()} discrepancies",
            count=discrepancies_unresolved(severity).count(),
            model="reconciliation.discrepancy",
            url=_changelist(
                "reconciliation_discrepancy",
                severity__exact=severity,
                status__in=",".join(UNRESOLVED),
            ),
            help="Open or acknowledged.",
            urgent=severity == Severity.MONEY,
        )
        for severity in (Severity.MONEY, Severity.EVIDENCE, Severity.HYGIENE)
    ]
    disputes_next = [
        DisputeDue(
            dispute=dispute,
            url=reverse("admin:disputes_dispute_change", args=[dispute.pk]),
            due_by=dispute.response_deadline,
            time_left=dispute.response_deadline - now,
        )
        for dispute in awaiting[:NEXT_DISPUTES]
        if dispute.response_deadline is not None
    ]
    return Console(
        now=now,
        tiles=tiles,
        discrepancies=discrepancies,
        disputes_next=disputes_next,
        verdicts=verdicts_per_day(now=now),
        escalations=escalations_per_day(now=now),
        stuck_after_s=stuck_after_s,
    )
