"""The phases that look from Vouch's side: accepted legs and funded charges of the window that
the listing did not show (read alone), what is stuck over the whole ledger (legs, funding,
verification runs past their deadline, filings in flight), and the ledger's own balances."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef

from disputes.models import FilingStatus, Packet
from envelopes.models import FundingLeg, FundingStatus, LegOutcome, RefundLeg
from envelopes.money import to_cents
from envelopes.selectors import ledger_breaches
from reconciliation.engine.charges import _funding_alone
from reconciliation.engine.refunds import _refund_leg_alone
from reconciliation.engine.shared import _chunks, _Context, _found, _ledger_observation
from reconciliation.models import DiscrepancyClass, Seen
from reconciliation.services import Finding
from verification.models import Verdict, VerificationRun


def _vouch_side(ctx: _Context) -> None:
    """Accepted legs and funded charges of the window that the listing did not show: each is
    read alone — gone at the provider (missing), or created just outside the window (compared)."""
    run = ctx.run
    if connection.vendor == "postgresql":
        # The run's Seen rows were all written just now: without fresh statistics the planner
        # believes there are none and nested-loops over them (quadratic in the listing).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE reconciliation_seen")
    seen = Seen.objects.filter(run=run)
    legs = (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(outcome=LegOutcome.ACCEPTED, released=False)
        .exclude(provider_refund_id="")
        .filter(reserved_at__gte=run.window_start, reserved_at__lt=run.window_end)
        .exclude(Exists(seen.filter(object_id=OuterRef("provider_refund_id"))))
        .order_by("id")
    )
    # The ids by a plain query, not a cursor: PostgreSQL plans a cursor for its first rows and,
    # believing the run's fresh Seen rows few, nested-loops over them (quadratic in the listing).
    for chunk in _chunks(list(legs.values_list("id", flat=True)), 500):
        for leg in legs.filter(id__in=chunk):
            _refund_leg_alone(ctx, leg)
    fundings = (
        FundingLeg.objects.select_related("envelope")
        .filter(status=FundingStatus.SUCCEEDED)
        .exclude(charge_id="")
        .filter(created_at__gte=run.window_start, created_at__lt=run.window_end)
        .exclude(Exists(seen.filter(object_id=OuterRef("charge_id"))))
        .order_by("id")
    )
    for chunk in _chunks(list(fundings.values_list("id", flat=True)), 500):
        for funding in fundings.filter(id__in=chunk):
            _funding_alone(ctx, funding)


def _stuck(ctx: _Context) -> None:
    """Stuck things, over the whole ledger (not only the window)."""
    stuck_before = ctx.now - timedelta(seconds=settings.RECONCILIATION_STUCK_AFTER_S)
    legs = (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN), reserved_at__lt=stuck_before)
        .order_by("id")
    )
    for leg in legs.iterator(chunk_size=500):
        side = {
            "leg": leg.public_id,
            "outcome": leg.outcome,
            "amount": to_cents(leg.amount_micro),
            "charge": leg.funding_leg.charge_id,
            "reserved_at": leg.reserved_at.isoformat(),
            "error_code": leg.error_code,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.LEG_STUCK,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Refund leg {leg.public_id} has been {leg.outcome} since "
                f"{leg.reserved_at:%Y-%m-%d %H:%M} UTC.",
                vouch_side=side,
                charge_id=leg.funding_leg.charge_id,
                envelope_public_id=leg.operation.envelope.public_id,
                amount_micro=leg.amount_micro,
                observation=_ledger_observation(ctx, "refund leg", side),
            ),
        )
    fundings = (
        FundingLeg.objects.select_related("envelope")
        .filter(status=FundingStatus.PENDING, created_at__lt=stuck_before)
        .order_by("id")
    )
    for funding in fundings.iterator(chunk_size=500):
        side = {
            "funding": funding.public_id,
            "status": funding.status,
            "amount": to_cents(funding.amount_micro),
            "payment_intent": funding.payment_intent_id,
            "created_at": funding.created_at.isoformat(),
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.FUNDING_STUCK,
                subject_type="funding_leg",
                subject_id=funding.public_id,
                summary=f"Funding leg {funding.public_id} has been pending since "
                f"{funding.created_at:%Y-%m-%d %H:%M} UTC.",
                vouch_side=side,
                charge_id=funding.charge_id,
                envelope_public_id=funding.envelope.public_id,
                amount_micro=funding.amount_micro,
                observation=_ledger_observation(ctx, "funding leg", side),
            ),
        )
    overdue = VerificationRun.objects.filter(verdict=Verdict.PENDING, deadline_at__lt=ctx.now)
    for vrun in overdue.order_by("id").iterator(chunk_size=500):
        side = {
            "run": vrun.public_id,
            "contract": vrun.contract_id,
            "verdict": vrun.verdict,
            "deadline_at": vrun.deadline_at.isoformat(),
            "attempts": vrun.attempts_made,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.RUN_OVERDUE,
                subject_type="verification_run",
                subject_id=vrun.public_id,
                summary=f"Verification run {vrun.public_id} ({vrun.contract_id}) is pending past "
                "its contract's timeout.",
                vouch_side=side,
                observation=_ledger_observation(ctx, "verification run", side),
            ),
        )
    filing_before = ctx.now - timedelta(seconds=settings.RECONCILIATION_FILING_STUCK_AFTER_S)
    filings = Packet.objects.select_related("dispute").filter(
        filing_status__in=(FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK),
        filing_started_at__lt=filing_before,
    )
    for packet in filings.order_by("id").iterator(chunk_size=500):
        side = {
            "dispute": packet.dispute.provider_dispute_id,
            "packet": packet.public_id,
            "filing_status": packet.filing_status,
            "filing_started_at": packet.filing_started_at.isoformat()
            if packet.filing_started_at
            else None,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.FILING_UNCONFIRMED,
                subject_type="dispute",
                subject_id=packet.dispute.provider_dispute_id,
                summary=f"The filing of packet {packet.public_id} has been in flight "
                f"({packet.filing_status}) for more than an hour.",
                vouch_side=side,
                charge_id=packet.dispute.charge_id,
                observation=_ledger_observation(ctx, "filing", side),
            ),
        )


def _ledger(ctx: _Context) -> None:
    """The `check_ledger` recomputation: every envelope whose balances disagree."""
    by_envelope: dict[str, list[Any]] = {}
    for breach in ledger_breaches():
        by_envelope.setdefault(breach.envelope, []).append(breach)
    for envelope_id, breaches in by_envelope.items():
        side = {b.balance: b.stored for b in breaches}
        computed = {b.balance: b.from_journal for b in breaches}
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.LEDGER_BREACH,
                subject_type="envelope",
                subject_id=envelope_id,
                summary=f"Envelope {envelope_id}'s stored balances disagree with its journal or "
                "legs: " + ", ".join(sorted(side)),
                vouch_side=side,
                provider_side={b.balance: b.from_legs for b in breaches},
                differing=sorted(side),
                envelope_public_id=envelope_id,
                amount_micro=max(abs(b.stored - b.from_legs) for b in breaches),
                observation=_ledger_observation(
                    ctx, "ledger", {"stored": side, "journal": computed}
                ),
            ),
        )
