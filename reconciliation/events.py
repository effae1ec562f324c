"""What Stripe's refund events tell reconciliation at once (SPEC §7, §15.1; issue 37, item 8): a
refund made in the Dashboard is known when its `charge.refunded` or `refund.created` event is
processed, not at the next hourly sweep.

The handler re-reads the provider (events may be stale, out of order or forged): the charge, and
— when it shows more refunded than Vouch counts on that funding leg (refunded, recorded by an
adjustment, or in flight) — every page of its refunds. That one charge is then compared as a
sweep compares it (`reconciliation.engine.charges.charge_compare`, the sweep's own comparers):
the reads are stored as observations with their SHA-256, and a refund nobody here made opens
`refund_foreign` (money: its escalation and the notification to ops) there and then. A charge
whose refunds Vouch accounts for costs one read and records nothing; an event that shows so by
itself (its refund names one of Vouch's legs, or its refunded amount is within Vouch's count:
`envelopes.services.refund_event_needs_no_read`) costs none (issue 40: Stripe's rate limits).

The findings need a run to belong to: each comparison is a small completed run of the events lane
(kind `catch_up`, the lane whose job is "the provider's events"), created only after the provider
was read, with its signed report like any run's. It never holds the lane, so it never waits for,
or blocks, the catch-up job (which may be the very caller, processing a caught-up event).

The buyer is told from the open discrepancies themselves (`foreign_refunds_under_review`,
registered with `envelopes.selectors.buyer.under_review_register`): envelopes stand below
reconciliation and cannot read its tables, and an open `refund_foreign` is the one truth of
"a person is reviewing this money" — it ends by itself when the adjustment recording it is
approved or a run sees the refund gone, where a copy kept on the envelopes side would have to be
kept in step with both."""

from __future__ import annotations

from typing import Any

from django.db.models import Sum

from core.budget import budget_from_settings
from core.services import audit_record
from envelopes.models import MICRO_PER_CENT, FundingLeg, FundingStatus
from envelopes.services import refund_event_needs_no_read
from providers import provider_from_settings
from reconciliation.engine.charges import charge_compare
from reconciliation.models import Discrepancy, DiscrepancyClass, Lane, Run, RunKind, RunStatus
from reconciliation.runs import run_finish
from verification import clock

EVENT_TYPES = ("charge.refunded", "refund.created")


def _charge_named(event: dict[str, Any]) -> str:
    """The charge an event is about: a charge's own id, or a refund's charge (an id: Vouch never
    asks Stripe to expand it); "" for anything else."""
    obj = (event.get("data") or {}).get("object") or {}
    if not isinstance(obj, dict):
        return ""
    named = {"charge": obj.get("id"), "refund": obj.get("charge")}.get(str(obj.get("object")))
    return named if isinstance(named, str) else ""


def charge_on_refund_event(*, event: dict[str, Any]) -> None:
    """`charge.refunded` / `refund.created`: compare that charge with the ledger now, when the
    provider shows more refunded on it than Vouch counts; the comparison is a run of its own (see
    the module's docstring), audited with the event. A provider that cannot be read raises, so
    the event stays unprocessed and is tried again."""
    charge_id = _charge_named(event)
    if not charge_id:
        return
    funding = FundingLeg.objects.filter(charge_id=charge_id, status=FundingStatus.SUCCEEDED).first()
    if funding is None:
        return  # not a charge Vouch counts money on
    if refund_event_needs_no_read(event, funding):
        return  # its own refund, or nothing beyond what Vouch counts: no read (issue 40)
    provider = provider_from_settings()
    budget = budget_from_settings("reconciliation")
    charge = provider.charge_read(charge_id, budget=budget)
    if not charge.accepted:
        if charge.refused:
            return  # no such charge: the event lied; the sweep reads it alone
        raise RuntimeError(
            f"charge {charge_id} could not be read: {charge.error_code} ({charge.error_message})"
        )
    refunded = charge.require().get("amount_refunded")
    counted = funding.refunded_micro + funding.reserved_micro
    if not isinstance(refunded, int) or refunded * MICRO_PER_CENT <= counted:
        return  # Vouch counts all of it: the sweep compares the rest
    pages = list(provider.refund_pages_of_charge(charge_id, budget=budget))  # may raise
    now = clock.now()
    run = Run.objects.create(
        kind=RunKind.CATCH_UP,
        lane=Lane.EVENTS,
        status=RunStatus.COMPLETED,  # never holds the lane (see the module's docstring)
        window_start=now,
        window_end=now,
        started_at=now,
        heartbeat_at=now,
        checkpoint={"event": event.get("id"), "charge": charge_id},
    )
    charge_compare(run=run, provider=provider, charge=charge, refund_pages=pages)
    run = run_finish(run)
    audit_record(
        actor=None,
        action="reconciliation.event_compare",
        target_type="reconciliation_run",
        target_id=run.public_id,
        details={
            "event": event.get("id"),
            "type": event.get("type"),
            "charge": charge_id,
            "opened": run.opened,
            "seen_again": run.seen,
        },
    )


def foreign_refunds_under_review(charge_ids: list[str]) -> dict[str, int]:
    """Money on these charges that a person is reviewing: the open `refund_foreign`
    discrepancies' amounts, by charge (micro-dollars). Registered with
    `envelopes.selectors.buyer.under_review_register` (reconciliation.apps)."""
    rows = (
        Discrepancy.objects.unresolved()
        .filter(code=DiscrepancyClass.REFUND_FOREIGN, charge_id__in=charge_ids)
        .order_by()
        .values("charge_id")
        .annotate(total=Sum("amount_micro"))
    )
    return {row["charge_id"]: int(row["total"] or 0) for row in rows}
