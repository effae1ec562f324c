"""Reads of reconciliation for the people who work it (SPEC §15.5): the discrepancy queue in its
order (open first, by severity, then age), what is overdue, the queue as CSV rows, one
discrepancy's two sides field by field, and a run's counts by class and what it read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import BooleanField, Case, IntegerField, Q, QuerySet, Value, When

from core.display import words_for as _words
from core.models import AuditEvent
from envelopes.adjustments import adjustment_kinds_for
from envelopes.models import AdjustmentKind, FundingLeg, RefundLeg
from reconciliation.models import (
    SEVERITY,
    SEVERITY_ORDER,
    UNRESOLVED,
    Discrepancy,
    DiscrepancyClass,
    DiscrepancyResolution,
    DiscrepancyStatus,
    Observation,
    Run,
    RunKind,
    RunStatus,
    Severity,
)
from reconciliation.services import discrepancy_legs
from verification.selectors import verdict_class_labels_register

# --- words for people: one mapping per code (the CSV, the runs' reports, the command's output and
# the runbooks keep the codes; the admin shows them in a "details" line, issue 41) ---------------

CLASS_LABELS: dict[str, str] = {
    DiscrepancyClass.CHARGE_MISSING: "Charge missing at Stripe",
    DiscrepancyClass.CHARGE_MISMATCH: "Charge and funding leg differ",
    DiscrepancyClass.CHARGE_REFUNDED_MISMATCH: "Charge's refunded total differs",
    DiscrepancyClass.REFUND_MISSING: "Refund missing at Stripe",
    DiscrepancyClass.REFUND_MISMATCH: "Refund and refund leg differ",
    DiscrepancyClass.REFUND_STATUS_DRIFT: "Refund's status changed at Stripe",
    DiscrepancyClass.REFUND_FOREIGN: "Refund made outside Vouch",
    DiscrepancyClass.REFUND_DUPLICATE: "Refund made twice",
    DiscrepancyClass.DISPUTE_UNRECORDED: "Dispute Vouch has not recorded",
    DiscrepancyClass.DISPUTE_STATUS_DRIFT: "Dispute's status changed at Stripe",
    DiscrepancyClass.FILING_UNCONFIRMED: "Filed evidence not confirmed by Stripe",
    DiscrepancyClass.DISPUTE_FUNDS_MISMATCH: "Dispute's withdrawn money differs",
    DiscrepancyClass.LEG_STUCK: "Refund leg stuck",
    DiscrepancyClass.FUNDING_STUCK: "Funding leg stuck",
    DiscrepancyClass.FUNDING_UNRECORDED: "Payment Vouch has not recorded",
    DiscrepancyClass.RUN_OVERDUE: "Reconciliation run overdue",
    DiscrepancyClass.LEDGER_BREACH: "Ledger does not add up",
}
SEVERITY_LABELS: dict[str, str] = {
    Severity.MONEY: "Money",
    Severity.EVIDENCE: "Evidence",
    Severity.HYGIENE: "Housekeeping",
}
STATUS_LABELS: dict[str, str] = {
    DiscrepancyStatus.OPEN: "Open",
    DiscrepancyStatus.ACKNOWLEDGED: "Taken by a person",
    DiscrepancyStatus.RESOLVED: "Resolved",
}
RESOLUTION_LABELS: dict[str, str] = {
    DiscrepancyResolution.CLEARED: "cleared by a later run",
    DiscrepancyResolution.ACCEPTED: "accepted with a note",
    DiscrepancyResolution.ADJUSTED: "corrected by an approved adjustment",
}
RUN_STATUS_LABELS: dict[str, str] = {
    RunStatus.RUNNING: "Running",
    RunStatus.COMPLETED: "Completed",
    RunStatus.FAILED: "Failed (resumes from its checkpoint)",
}
RUN_KIND_LABELS: dict[str, str] = {
    RunKind.CATCH_UP: "Event catch-up",
    RunKind.SWEEP: "Hourly sweep (last 7 days)",
    RunKind.FULL: "Daily full pass (last 90 days)",
    RunKind.MANUAL: "By hand (manage.py reconcile)",
}

# An escalation a run opens carries its discrepancy's class: the escalation pages say it so too.
verdict_class_labels_register(CLASS_LABELS)

# A discrepancy's history (its audit events' actions), in words.
HISTORY_LABELS: dict[str, str] = {
    "discrepancy.open": "Opened by a run",
    "discrepancy.acknowledge": "Taken (acknowledged)",
    "discrepancy.accept": "Accepted with a note",
    "discrepancy.propose_adjustment": "Adjustment proposed",
    "discrepancy.adjusted": "Corrected by an approved adjustment",
    "discrepancy.clear": "Cleared by a run that no longer saw it",
}


def class_label(code: str | None) -> str:
    return _words(CLASS_LABELS, code)


def severity_label(severity: str | None) -> str:
    return _words(SEVERITY_LABELS, severity)


def status_label(status: str | None, resolution: str | None = "") -> str:
    """A discrepancy's status, and how it was resolved, in words."""
    said = _words(STATUS_LABELS, status)
    return f"{said}: {_words(RESOLUTION_LABELS, resolution)}" if resolution else said


def history_label(action: str | None) -> str:
    return HISTORY_LABELS.get(action or "") or (action or "").replace("_", " ").replace(".", ": ")


def run_status_label(status: str | None) -> str:
    return _words(RUN_STATUS_LABELS, status)


def run_kind_label(kind: str | None) -> str:
    return _words(RUN_KIND_LABELS, kind)


# The queue's order: annotations made by `discrepancy_queue`, then the oldest first.
QUEUE_ORDER = ("queue_rank", "severity_rank", "first_seen_at", "id")


def _overdue(now: datetime) -> Q:
    return Q(status__in=UNRESOLVED, due_at__lt=now)


def discrepancy_queue(
    queryset: QuerySet[Discrepancy] | None = None, *, now: datetime
) -> QuerySet[Discrepancy]:
    """The queue: open and acknowledged ones first, then money, evidence, hygiene, then the
    oldest first. Each row carries `overdue` (still open past its target at `now`)."""
    rows = Discrepancy.objects.all() if queryset is None else queryset
    return rows.annotate(
        queue_rank=Case(
            When(status__in=UNRESOLVED, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        ),
        severity_rank=Case(
            *(When(severity=s, then=Value(rank)) for s, rank in SEVERITY_ORDER.items()),
            default=Value(len(SEVERITY_ORDER)),
            output_field=IntegerField(),
        ),
        overdue=Case(
            When(_overdue(now), then=Value(True)), default=Value(False), output_field=BooleanField()
        ),
    ).order_by(*QUEUE_ORDER)


def discrepancies_overdue(
    queryset: QuerySet[Discrepancy] | None = None, *, now: datetime
) -> QuerySet[Discrepancy]:
    """Those still open (or acknowledged) past their target."""
    rows = Discrepancy.objects.all() if queryset is None else queryset
    return rows.filter(_overdue(now))


def discrepancies_within_target(
    queryset: QuerySet[Discrepancy] | None = None, *, now: datetime
) -> QuerySet[Discrepancy]:
    """Those still open (or acknowledged) with time left."""
    rows = Discrepancy.objects.all() if queryset is None else queryset
    return rows.filter(status__in=UNRESOLVED, due_at__gte=now)


# --- the queue as CSV ---------------------------------------------------------------------------

EXPORT_COLUMNS = (
    "public_id",
    "class",
    "severity",
    "status",
    "resolution",
    "subject_type",
    "subject_id",
    "charge_id",
    "envelope",
    "amount_micro",
    "summary",
    "first_seen_at",
    "last_seen_at",
    "seen_count",
    "due_at",
    "overdue",
)
# A spreadsheet runs a cell that starts with one of these as a formula: text that came from the
# provider (a subject id, a summary quoting it) is quoted so that it stays text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    return f"'{value}" if value.startswith(_FORMULA_START) else value


def iso_utc(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def discrepancy_export_rows(
    queryset: QuerySet[Discrepancy], *, now: datetime
) -> Iterator[list[str]]:
    """The header, then one row per discrepancy of `queryset`, in its order, read in chunks (the
    memory stays flat however long the queue is)."""
    yield list(EXPORT_COLUMNS)
    for d in queryset.iterator(chunk_size=500):
        overdue = d.status in UNRESOLVED and d.due_at < now
        yield [
            d.public_id,
            d.code,
            d.severity,
            d.status,
            d.resolution,
            _text(d.subject_type),
            _text(d.subject_id),
            _text(d.charge_id),
            _text(d.envelope_public_id),
            str(d.amount_micro),
            _text(d.summary),
            iso_utc(d.first_seen_at),
            iso_utc(d.last_seen_at),
            str(d.seen_count),
            iso_utc(d.due_at),
            "yes" if overdue else "no",
        ]


# --- one discrepancy ----------------------------------------------------------------------------

_ABSENT: Any = object()


@dataclass(frozen=True)
class SideRow:
    """One field: what Vouch holds, what the provider holds, and whether the run found them to
    differ. `vouch`/`provider` are `ABSENT` when that side has no such field."""

    field: str
    vouch: Any
    provider: Any
    differs: bool

    @property
    def vouch_absent(self) -> bool:
        return self.vouch is _ABSENT

    @property
    def provider_absent(self) -> bool:
        return self.provider is _ABSENT


def discrepancy_sides(discrepancy: Discrepancy) -> list[SideRow]:
    """Vouch's side and the provider's, one row per field: the union of both sides' fields and
    those named as differing, by name (the database keeps no order of a JSON object's keys)."""
    vouch = discrepancy.vouch_side if isinstance(discrepancy.vouch_side, dict) else {}
    provider = discrepancy.provider_side if isinstance(discrepancy.provider_side, dict) else {}
    differing = {str(name) for name in discrepancy.differing or []}
    names = sorted({*map(str, vouch), *map(str, provider), *differing})
    return [
        SideRow(
            field=name,
            vouch=vouch.get(name, _ABSENT),
            provider=provider.get(name, _ABSENT),
            differs=name in differing,
        )
        for name in names
    ]


@dataclass(frozen=True)
class Correction:
    """What an adjustment of a discrepancy would correct and the kinds that fit it now."""

    refund_leg: RefundLeg | None
    funding_leg: FundingLeg | None
    kinds: list[AdjustmentKind]
    provider_object_id: str  # the provider object to name, when the discrepancy knows it


def discrepancy_correction(discrepancy: Discrepancy) -> Correction:
    refund_leg, funding_leg = discrepancy_legs(discrepancy)
    kinds = adjustment_kinds_for(
        refund_leg=refund_leg, funding_leg=funding_leg if refund_leg is None else None
    )
    named = discrepancy.subject_id if discrepancy.subject_type == "refund" else ""
    return Correction(refund_leg, funding_leg, kinds, named)


def discrepancy_history(discrepancy: Discrepancy) -> QuerySet[AuditEvent]:
    """Its audit events, oldest first: every transition and who made it."""
    return AuditEvent.objects.filter(
        target_type="discrepancy", target_id=discrepancy.public_id
    ).order_by("created_at", "id")


# --- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassCount:
    code: str
    severity: str
    opened: int
    seen: int
    cleared: int
    still_open: int

    @property
    def label(self) -> str:
        return class_label(self.code)

    @property
    def severity_label(self) -> str:
        return severity_label(self.severity)


def _count(counts: Any, code: str) -> int:
    return int(counts.get(code, 0)) if isinstance(counts, dict) else 0


def _total(counts: Any) -> int:
    return sum(int(v) for v in counts.values()) if isinstance(counts, dict) else 0


def run_class_counts(run: Run) -> list[ClassCount]:
    """Discrepancies opened, seen again, cleared and still open by class, money first."""
    codes: set[str] = set()
    for counts in (run.opened, run.seen, run.cleared, run.still_open):
        if isinstance(counts, dict):
            codes.update(str(c) for c in counts)
    rows = [
        ClassCount(
            code=code,
            severity=SEVERITY.get(code, ""),
            opened=_count(run.opened, code),
            seen=_count(run.seen, code),
            cleared=_count(run.cleared, code),
            still_open=_count(run.still_open, code),
        )
        for code in codes
    ]
    order = {str(s): rank for s, rank in SEVERITY_ORDER.items()}
    return sorted(rows, key=lambda r: (order.get(r.severity, len(order)), r.code))


@dataclass(frozen=True)
class RunTotals:
    compared: int
    opened: int
    seen: int
    cleared: int
    still_open: int


def run_totals(run: Run) -> RunTotals:
    return RunTotals(
        compared=_total(run.compared),
        opened=_total(run.opened),
        seen=_total(run.seen),
        cleared=_total(run.cleared),
        still_open=_total(run.still_open),
    )


def run_observations(run: Run) -> QuerySet[Observation]:
    """The provider pages a run read, in order, without their (large) bodies."""
    return run.observations.defer("body", "data").order_by("observed_at", "id")


def run_discrepancies_opened(run: Run, *, now: datetime) -> QuerySet[Discrepancy]:
    """Those this run opened, in the queue's order."""
    return discrepancy_queue(Discrepancy.objects.filter(first_run=run), now=now)


def run_discrepancies_cleared(run: Run) -> QuerySet[Discrepancy]:
    """Those a page this run read showed gone."""
    return Discrepancy.objects.filter(cleared_by__run=run).order_by("resolved_at", "id")


def observation_discrepancies(observation: Observation) -> QuerySet[Discrepancy]:
    """The discrepancies last seen in, or cleared by, this provider page."""
    return Discrepancy.objects.filter(
        Q(observation=observation) | Q(cleared_by=observation)
    ).order_by("first_seen_at", "id")
