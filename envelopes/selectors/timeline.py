"""One timeline per envelope, as the admin page lists it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse

from envelopes.models import (
    AdjustmentStatus,
    Envelope,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.selectors.words import (
    adjustment_status_label,
    funding_status_label,
    journal_kind_label,
    journal_note_words,
    lower_first,
    refund_outcome_words,
)
from verification.models import Attempt, Escalation, ProviderEvent, Verdict, VerificationRun
from verification.selectors import trigger_label, verdict_class_label, verdict_label


@dataclass(frozen=True)
class TimelineItem:
    """One dated thing that happened to an envelope, as the admin page lists it."""

    at: datetime
    kind: str  # journal, funding, provider, debit, refund, attempt, verdict, webhook, adjustment,
    # escalation
    title: str  # what happened, in a person's words (issue 41 item 5)
    detail: str = ""
    details: str = ""  # the codes behind the title, for the quiet "details" line
    provider_ids: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (label, admin URL)
    tone: str = "neutral"
    rank: int = 0  # among items of one instant: the order they happened in


def _admin_url(name: str, pk: Any) -> str:
    # By name, not by import: the pages live in apps above this one (receipts, reconciliation).
    return reverse(f"admin:{name}", args=[pk])


def _receipts_url(provider_id: str) -> str:
    return f"{reverse('admin:receipts_receipt_changelist')}?{urlencode({'q': provider_id})}"


def _codes(*codes: str | None) -> str:
    return " · ".join(c for c in codes if c)


def _verdict_words(verdict: str, verdict_class: str = "") -> str:
    said = lower_first(verdict_label(verdict))
    return f"{said}: {lower_first(verdict_class_label(verdict_class))}" if verdict_class else said


def _event_words(event_type: str) -> str:
    """A Stripe event type as words: `charge.dispute.funds_withdrawn` is "charge dispute funds
    withdrawn" (the type itself goes to the details line)."""
    return event_type.replace(".", " ").replace("_", " ")


def _deltas_text(entry: JournalEntry) -> str:
    names = (
        ("funded", entry.funded_delta),
        ("debited", entry.debited_delta),
        ("refunded", entry.refunded_delta),
        ("reserved", entry.reserved_delta),
        ("unspent", entry.unspent_delta),
    )
    return ", ".join(f"{name} {value:+,}" for name, value in names if value)


def envelope_timeline(envelope: Envelope) -> list[TimelineItem]:
    """Everything dated about `envelope`, oldest first: journal entries; funding legs and refund
    legs with each provider call and its answer; debits; the attempts and verdicts of the
    verification runs about its charges and refunds; the provider events about them; adjustments;
    escalations. Each item names its provider ids and links to the page that shows it."""
    items: list[TimelineItem] = []
    fundings = list(envelope.funding_legs.order_by("sequence"))
    legs = list(
        RefundLeg.objects.filter(operation__envelope=envelope)
        .select_related("operation", "funding_leg")
        .order_by("reserved_at", "id")
    )
    for funding in fundings:
        ids = tuple(i for i in (funding.payment_intent_id, funding.charge_id) if i)
        items.append(
            TimelineItem(
                at=funding.created_at,
                kind="funding",
                title=f"{funding.get_kind_display()} #{funding.sequence} charge sent",
                detail=f"{funding.public_id} · {funding.amount_micro:,} micro · PaymentIntent "
                f"create (key {funding.idempotency_key})",
                provider_ids=ids,
                rank=1,
            )
        )
        if funding.funded_at is not None:
            items.append(
                TimelineItem(
                    at=funding.funded_at,
                    kind="provider",
                    title=f"Stripe answered: {lower_first(funding_status_label(funding.status))}",
                    detail=f"{funding.public_id} funded",
                    details=funding.status,
                    provider_ids=ids,
                    links=(
                        (("receipts", _receipts_url(funding.charge_id)),)
                        if funding.charge_id
                        else ()
                    ),
                    tone="good",
                    rank=2,
                )
            )
        elif funding.status == FundingStatus.PENDING:
            items.append(
                TimelineItem(
                    at=funding.created_at,
                    kind="provider",
                    title="No answer yet: the charge is pending (not funded money)",
                    detail=funding.public_id,
                    details=funding.status,
                    provider_ids=ids,
                    tone="warn",
                    rank=2,
                )
            )
    for debit in envelope.debits.select_related("created_by").order_by("created_at", "id"):
        items.append(
            TimelineItem(
                at=debit.created_at,
                kind="debit",
                title=f"Debit {debit.amount_micro:,} micro",
                detail=f"{debit.public_id} · {debit.reference} · by {debit.created_by}",
                rank=3,
            )
        )
    for leg in legs:
        operation_link = (
            ("refund operation", _admin_url("envelopes_refundoperation_change", leg.operation_id)),
        )
        items.append(
            TimelineItem(
                at=leg.reserved_at,
                kind="refund",
                title=f"Refund leg #{leg.sequence} reserved and sent",
                detail=f"{leg.public_id} · {leg.amount_micro:,} micro on "
                f"{leg.funding_leg.charge_id or leg.funding_leg.public_id} · Refund create "
                f"(key {leg.idempotency_key})",
                provider_ids=tuple(i for i in (leg.funding_leg.charge_id,) if i),
                links=operation_link,
                rank=4,
            )
        )
        if leg.decided_at is None and leg.outcome == LegOutcome.UNKNOWN:
            items.append(
                TimelineItem(
                    at=leg.reserved_at,
                    kind="provider",
                    title="No answer to trust: Stripe's answer is unknown (the money stays "
                    "reserved)",
                    detail=f"{leg.public_id} after {leg.attempts} attempt(s)",
                    details=_codes(leg.outcome, leg.error_code),
                    links=operation_link,
                    tone="warn",
                    rank=5,
                )
            )
        if leg.decided_at is not None:
            tone = {"accepted": "good", "refused": "bad", "void": "bad"}.get(leg.outcome, "warn")
            links: tuple[tuple[str, str], ...] = operation_link
            if leg.provider_refund_id:
                links = (*links, ("receipts", _receipts_url(leg.provider_refund_id)))
            items.append(
                TimelineItem(
                    at=leg.decided_at,
                    kind="provider",
                    title=refund_outcome_words(leg.outcome, leg.error_code),
                    detail=f"{leg.public_id} after {leg.attempts} attempt(s)",
                    details=_codes(leg.outcome, leg.error_code),
                    provider_ids=tuple(i for i in (leg.provider_refund_id,) if i),
                    links=links,
                    tone=tone,
                    rank=5,
                )
            )
    for entry in envelope.journal.select_related("funding_leg", "debit", "refund_leg").order_by(
        "id"
    ):
        about = (
            entry.refund_leg.public_id
            if entry.refund_leg
            else entry.debit.public_id
            if entry.debit
            else entry.funding_leg.public_id
            if entry.funding_leg
            else ""
        )
        note, note_as_written = journal_note_words(entry.note)
        items.append(
            TimelineItem(
                at=entry.created_at,
                kind="journal",
                title=f"Journal: {lower_first(journal_kind_label(entry.kind))}",
                detail=" · ".join(p for p in (_deltas_text(entry), about, note) if p),
                details=_codes(entry.kind, note_as_written),
                rank=6,
            )
        )
    # The verification runs about this envelope's charges and refunds.
    run_ids = {leg.verification_run_id for leg in legs if leg.verification_run_id}
    runs = list(
        VerificationRun.objects.filter(
            Q(pk__in=run_ids) | Q(operation_id__in=[f.idempotency_key for f in fundings])
        )
    )
    for attempt in (
        Attempt.objects.filter(run__in=runs).select_related("run").order_by("finished_at", "id")
    ):
        items.append(
            TimelineItem(
                at=attempt.finished_at,
                kind="attempt",
                title=f"Verification attempt {attempt.number} ({trigger_label(attempt.trigger)}): "
                + lower_first(verdict_label(attempt.verdict)),
                details=_codes(attempt.trigger, attempt.verdict),
                detail=f"{attempt.run.contract_id} · {attempt.run.public_id}"
                + (f" · {attempt.reason}" if attempt.reason else ""),
                links=(("run", _admin_url("verification_verificationrun_change", attempt.run_id)),),
                tone=_VERDICT_TONES.get(attempt.verdict, "neutral"),
                rank=7,
            )
        )
    for run in runs:
        if run.decided_at is None:
            continue
        subject = str(run.action_result.get("id") or run.input.get("charge") or "")
        items.append(
            TimelineItem(
                at=run.decided_at,
                kind="verdict",
                title=f"Verdict: {_verdict_words(run.verdict, run.verdict_class)}",
                details=_codes(run.verdict, run.verdict_class),
                detail=f"{run.contract_id} · {run.public_id}"
                + (f" · {run.verdict_reason}" if run.verdict_reason else ""),
                provider_ids=(subject,) if subject else (),
                links=(("run", _admin_url("verification_verificationrun_change", run.pk)),),
                tone=_VERDICT_TONES.get(run.verdict, "neutral"),
                rank=8,
            )
        )
    # Provider events (webhooks, or caught up) about its charges, PaymentIntents and refunds.
    charges = [f.charge_id for f in fundings if f.charge_id]
    intents = [f.payment_intent_id for f in fundings if f.payment_intent_id]
    refunds = [leg.provider_refund_id for leg in legs if leg.provider_refund_id]
    objects = [*charges, *intents, *refunds]
    if objects:
        events = ProviderEvent.objects.filter(
            Q(payload__data__object__id__in=objects)
            | Q(payload__data__object__charge__in=charges or [""])
            | Q(payload__data__object__payment_intent__in=intents or [""])
        ).order_by("received_at", "id")
        for event in events:
            obj = (event.payload.get("data") or {}).get("object") or {}
            object_id = str(obj.get("id") or "") if isinstance(obj, dict) else ""
            items.append(
                TimelineItem(
                    at=event.received_at,
                    kind="webhook",
                    title=f"Stripe told Vouch: {_event_words(event.type)}"
                    + (" (found by reconciliation)" if event.source == "catch_up" else ""),
                    details=_codes(event.type, event.source),
                    detail=("processed" if event.processed_at else "not processed yet")
                    + (
                        f" · error: {event.processing_error[:120]}"
                        if event.processing_error
                        else ""
                    ),
                    provider_ids=tuple(i for i in (event.event_id, object_id) if i),
                    links=(("event", _admin_url("verification_providerevent_change", event.pk)),),
                    tone="bad" if event.processing_error else "neutral",
                    rank=9,
                )
            )
    for adjustment in envelope.adjustments.select_related("proposed_by", "decided_by").order_by(
        "proposed_at", "id"
    ):
        link = (("adjustment", _admin_url("reconciliation_adjustment_change", adjustment.pk)),)
        ids = (adjustment.provider_object_id,) if adjustment.provider_object_id else ()
        items.append(
            TimelineItem(
                at=adjustment.proposed_at,
                kind="adjustment",
                title=f"Adjustment proposed: {adjustment.get_kind_display()}",
                detail=f"{adjustment.public_id} · {adjustment.amount_micro:,} micro · by "
                f"{adjustment.proposed_by} · {adjustment.reason[:120]}",
                provider_ids=ids,
                links=link,
                rank=10,
            )
        )
        if adjustment.decided_at is not None:
            items.append(
                TimelineItem(
                    at=adjustment.decided_at,
                    kind="adjustment",
                    title=f"Adjustment {lower_first(adjustment_status_label(adjustment.status))}",
                    details=adjustment.status,
                    detail=f"{adjustment.public_id} · by {adjustment.decided_by}",
                    provider_ids=ids,
                    links=link,
                    tone="good" if adjustment.status == AdjustmentStatus.APPLIED else "bad",
                    rank=11,
                )
            )
    subjects = [f.public_id for f in fundings] + [leg.public_id for leg in legs]
    escalations = Escalation.objects.filter(Q(subject_id__in=subjects) | Q(run__in=runs)).order_by(
        "created_at", "id"
    )
    for escalation in escalations:
        link = (("escalation", _admin_url("verification_escalation_change", escalation.pk)),)
        items.append(
            TimelineItem(
                at=escalation.created_at,
                kind="escalation",
                title="Escalation opened: "
                + _verdict_words(escalation.verdict, escalation.verdict_class),
                details=_codes(escalation.verdict, escalation.verdict_class),
                detail=f"{escalation.subject_type} {escalation.subject_id} · "
                f"{escalation.reason[:160]}",
                links=link,
                tone="bad",
                rank=12,
            )
        )
        if escalation.resolved_at is not None:
            items.append(
                TimelineItem(
                    at=escalation.resolved_at,
                    kind="escalation",
                    title="Escalation resolved"
                    + (
                        f": {lower_first(escalation.get_resolution_display())}"
                        if escalation.resolution
                        else ""
                    ),
                    details=escalation.resolution,
                    detail=escalation.resolution_note[:160],
                    links=link,
                    tone="good",
                    rank=13,
                )
            )
    return sorted(items, key=lambda item: (item.at, item.rank))


_VERDICT_TONES: dict[str, str] = {  # a StrEnum member hashes as its value
    Verdict.VERIFIED: "good",
    Verdict.CONTRADICTED: "bad",
    Verdict.FAILED: "bad",
    Verdict.UNVERIFIABLE: "bad",
    Verdict.PENDING: "warn",
}
