"""Reconciliation runs (SPEC §15.3, §15.5): one at a time per lane (a database constraint), a
heartbeat and a checkpoint so a run whose process died is resumed where it stopped, and the
signed report a finished run leaves: canonical JSON (RFC 8785), its SHA-256, and an Ed25519
signature with the receipt key — a verifiable statement that over its window Vouch and the
provider agreed on N objects except those listed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count

from core.services import audit_record
from receipts import keys
from receipts.canonical import canonical_bytes
from reconciliation.models import (
    SEVERITY,
    Discrepancy,
    DiscrepancyStatus,
    DueRun,
    Lane,
    Run,
    RunKind,
    RunStatus,
)
from verification import clock

LANE_OF = {
    RunKind.CATCH_UP: Lane.EVENTS,
    RunKind.SWEEP: Lane.OBJECTS,
    RunKind.FULL: Lane.OBJECTS,
    RunKind.MANUAL: Lane.OBJECTS,
}
REPORT_VERSION = 1


class RunInProgress(Exception):
    """Another run of this lane is alive: two runs never overlap."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"run {run.public_id} ({run.kind}) is in progress")
        self.run = run


def _dead(run: Run, now: datetime) -> bool:
    return run.heartbeat_at < now - timedelta(seconds=settings.RECONCILIATION_HEARTBEAT_TIMEOUT_S)


def _fits(run: Run, *, dry_run: bool, window: tuple[datetime, datetime] | None) -> bool:
    """Whether a run asked for with these flags may take `run` up: the same mode, and the same
    window when one was asked for (a run's mode and window are fixed when it is created)."""
    if run.dry_run != dry_run:
        return False
    return window is None or (run.window_start, run.window_end) == window


def run_start(
    *,
    kind: str,
    window_start: datetime,
    window_end: datetime,
    dry_run: bool = False,
    window_asked: bool = False,
) -> Run:
    """Start a run of `kind` over [window_start, window_end), or resume one of its kind asked for
    with the same flags that was interrupted — its process died (its heartbeat stopped) or it
    could not complete (the newest such run failed). A resumed run keeps its own mode, window and
    checkpoint; with `window_asked`, only a run of exactly that window is taken up. A run whose
    process died that this request may not take up (another kind, mode or window) is set aside
    as failed — resumable by a run asked for as it was — and a new run starts. A new run of a
    kind that was queued (`run_queue`) takes its place in the queue. Raises RunInProgress when a
    live run holds the lane."""
    lane = LANE_OF[RunKind(kind)]
    now = clock.now()
    window = (window_start, window_end) if window_asked else None
    with transaction.atomic():
        running = (
            Run.objects.select_for_update().filter(lane=lane, status=RunStatus.RUNNING).first()
        )
        if running is not None:
            if not _dead(running, now):
                raise RunInProgress(running)
            if running.kind == kind and _fits(running, dry_run=dry_run, window=window):
                running.heartbeat_at = now
                running.resumed += 1
                running.save(update_fields=["heartbeat_at", "resumed"])
                audit_record(
                    actor=None,
                    action="reconciliation.resume",
                    target_type="reconciliation_run",
                    target_id=running.public_id,
                    details={"checkpoint": running.checkpoint, "resumed": running.resumed},
                )
                _take_due(kind)
                return running
            _set_aside(running, now=now, kind=kind, dry_run=dry_run)
        same = Run.objects.filter(lane=lane, kind=kind, dry_run=dry_run)
        if window is not None:
            same = same.filter(window_start=window_start, window_end=window_end)
        newest = same.order_by("-started_at", "-id").first()
        if newest is not None and newest.status == RunStatus.FAILED:
            # It could not complete (the provider was unreadable): take it up where it stopped.
            newest.status = RunStatus.RUNNING
            newest.heartbeat_at = now
            newest.resumed += 1
            newest.error = ""
            newest.finished_at = None
            newest.save(update_fields=["status", "heartbeat_at", "resumed", "error", "finished_at"])
            _take_due(kind)
            return newest
    try:
        with transaction.atomic():
            run = Run.objects.create(
                kind=kind,
                lane=lane,
                dry_run=dry_run,
                window_start=window_start,
                window_end=window_end,
                started_at=now,
                heartbeat_at=now,
            )
            _take_due(kind)
            return run
    except IntegrityError:  # another process started one at the same moment
        raise RunInProgress(Run.objects.get(lane=lane, status=RunStatus.RUNNING)) from None


def _set_aside(run: Run, *, now: datetime, kind: str, dry_run: bool) -> None:
    """A run whose process died, which a run asked for with other flags must not take up: failed
    (resumable by a run asked for as it was), so that the lane is free."""
    mode = "a dry run" if dry_run else "a real run"
    run.status = RunStatus.FAILED
    run.finished_at = now
    run.error = (
        f"its process died (no heartbeat since {run.heartbeat_at:%Y-%m-%dT%H:%M:%SZ}); set aside "
        f"by {mode} of kind {kind} asked for with other flags, which does not take it up"
    )
    run.save(update_fields=["status", "finished_at", "error"])
    audit_record(
        actor=None,
        action="reconciliation.set_aside",
        target_type="reconciliation_run",
        target_id=run.public_id,
        details={"checkpoint": run.checkpoint, "by_kind": kind, "by_dry_run": dry_run},
    )


def _take_due(kind: str) -> None:
    """The run of `kind` starting now is the one that was due: it leaves the queue."""
    DueRun.objects.filter(kind=kind).delete()


def run_queue(kind: str, *, behind: Run) -> DueRun:
    """`kind` fell due while `behind` held its lane: record it as due, to run right after (once:
    falling due again while queued is the same run)."""
    lane = LANE_OF[RunKind(kind)]
    now = clock.now()
    with transaction.atomic():
        due, created = DueRun.objects.select_for_update().get_or_create(
            kind=kind, defaults={"lane": lane, "due_at": now, "behind": behind.public_id}
        )
        if created:
            audit_record(
                actor=None,
                action="reconciliation.queue",
                target_type="reconciliation_run",
                target_id=behind.public_id,
                details={"kind": kind, "behind": behind.public_id},
            )
        else:
            due.times += 1
            due.save(update_fields=["times"])
    return due


def run_due_next(lane: str = Lane.OBJECTS) -> str | None:
    """The kind of the oldest run due in `lane`, if any."""
    return (
        DueRun.objects.filter(lane=lane)
        .order_by("due_at", "id")
        .values_list("kind", flat=True)
        .first()
    )


def run_checkpoint(run: Run, **checkpoint: Any) -> None:
    """Save where the run stands and its counts so far, and show it is alive. Raises
    RunInProgress if another process took the run over (this one was thought dead)."""
    now = clock.now()
    run.checkpoint = checkpoint
    run.heartbeat_at = now
    fields = [
        "checkpoint",
        "heartbeat_at",
        "compared",
        "provider_calls",
        "pages",
        "expected",
        "corrected",
        "opened",
        "seen",
        "cleared",
    ]
    updated = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, resumed=run.resumed).update(
        **{name: getattr(run, name) for name in fields}
    )
    if not updated:
        raise RunInProgress(Run.objects.get(pk=run.pk))


def run_fail(run: Run, *, error: str) -> Run:
    """The run could not complete (the provider could not be read): it stays resumable from its
    checkpoint by the next run of its lane."""
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, error=error[:2000], finished_at=clock.now()
    )
    run.refresh_from_db()
    return run


def open_by_class() -> dict[str, int]:
    rows = (
        Discrepancy.objects.exclude(status=DiscrepancyStatus.RESOLVED)
        .values("code")
        .annotate(n=Count("id"))
    )
    return {row["code"]: row["n"] for row in rows}


def report_body(run: Run) -> dict[str, Any]:
    """What the run states, as signed: its window, times, counts, and every discrepancy open at
    its end (class, subject, since when) — Vouch and the provider agreed on everything else."""
    open_now = (
        Discrepancy.objects.exclude(status=DiscrepancyStatus.RESOLVED)
        .order_by("code", "subject_type", "subject_id")
        .values_list("public_id", "code", "subject_type", "subject_id", "first_seen_at")
    )
    return {
        "version": REPORT_VERSION,
        "run": run.public_id,
        "kind": run.kind,
        "dry_run": run.dry_run,
        "window": {"start": _iso(run.window_start), "end": _iso(run.window_end)},
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at) if run.finished_at else None,
        "compared": run.compared,
        "compared_total": sum(run.compared.values()),
        "provider_calls": run.provider_calls,
        "pages": run.pages,
        "expected": run.expected,
        "corrected": run.corrected,
        "opened": run.opened,
        "seen_again": run.seen,
        "cleared": run.cleared,
        "still_open": run.still_open,
        "open_discrepancies": [
            {
                "id": public_id,
                "class": code,
                "severity": SEVERITY[code],
                "subject": f"{subject_type}:{subject_id}",
                "since": _iso(first_seen),
            }
            for public_id, code, subject_type, subject_id, first_seen in open_now
        ],
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def run_finish(run: Run) -> Run:
    """Complete the run: still-open counts, the canonical report, its SHA-256 and signature."""
    run.finished_at = clock.now()
    run.still_open = open_by_class()
    run.status = RunStatus.COMPLETED
    body = report_body(run)
    canonical = canonical_bytes(body)
    run.report = body
    run.report_sha256 = hashlib.sha256(canonical).hexdigest()
    if keys.signing_key_configured():
        key = keys.signing_key()
        run.report_signature = key.sign(canonical)
        run.report_key_id = key.key_id
    run.checkpoint = {"phase": "done"}
    run.save()
    return run


@dataclass(frozen=True)
class ReportCheck:
    ok: bool
    problem: str | None


def report_verify(run: Run) -> ReportCheck:
    """Check a run's stored report: its canonical bytes hash to the stored SHA-256 and the
    signature verifies with a trusted key."""
    if not run.report:
        return ReportCheck(False, "the run has no report (it did not complete)")
    canonical = canonical_bytes(run.report)
    if hashlib.sha256(canonical).hexdigest() != run.report_sha256:
        return ReportCheck(False, "the report does not hash to its stored SHA-256")
    if not run.report_signature:
        return ReportCheck(False, "the report is not signed (no receipt key was configured)")
    trust = keys.signature_verify(
        message=canonical, signature=run.report_signature, key_id=run.report_key_id
    )
    if not trust.ok:
        return ReportCheck(False, f"the signature does not verify: {trust.code.value}")
    return ReportCheck(True, None)
