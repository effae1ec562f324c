"""Reads: what the API shows of envelopes and refunds, and the ledger check."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import BigIntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.urls import reverse

from core import db
from core.exceptions import NotFound
from envelopes.models import (
    BALANCES,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    Debit,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.money import with_usd

# The allocation rule is one function, shared with the refund that reserves it (a pure function:
# no write happens through this import).
from envelopes.services import refund_allocate
from verification.models import Attempt, Escalation, ProviderEvent, VerificationRun
from verification.subjects import Subject

if TYPE_CHECKING:
    from accounts.models import User


def envelope_get_owned(*, user: User, envelope_id: str) -> Envelope:
    """The caller's envelope, or the very same NotFound as a missing one (SPEC §5)."""
    envelope = Envelope.objects.filter(public_id=envelope_id, owner=user).first()
    if envelope is None:
        raise NotFound()
    return envelope


def envelopes_of(*, user: User) -> QuerySet[Envelope]:
    return Envelope.objects.filter(owner=user).order_by("-created_at", "-id")


def refund_get_owned(*, user: User, refund_id: str) -> RefundOperation:
    operation = (
        RefundOperation.objects.select_related("envelope")
        .filter(public_id=refund_id, envelope__owner=user)
        .first()
    )
    if operation is None:
        raise NotFound()
    return operation


def balances(envelope: Envelope) -> dict[str, Any]:
    return {name: getattr(envelope, name) for name in BALANCES}


def _funding(leg: FundingLeg) -> dict[str, Any]:
    return {
        "funding_id": leg.public_id,
        "kind": leg.kind,
        "sequence": leg.sequence,
        "status": leg.status,
        "amount_micro": leg.amount_micro,
        "refunded_micro": leg.refunded_micro,
        "reserved_micro": leg.reserved_micro,
        "charge": leg.charge_id or None,
        "payment_intent": leg.payment_intent_id or None,
        "created_at": leg.created_at.isoformat(),
    }


def _debit(debit: Debit) -> dict[str, Any]:
    return {
        "debit_id": debit.public_id,
        "amount_micro": debit.amount_micro,
        "reference": debit.reference,
        "created_at": debit.created_at.isoformat(),
    }


def envelope_data(envelope: Envelope, *, detail: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "envelope_id": envelope.public_id,
        "currency": envelope.currency,
        **balances(envelope),
        "created_at": envelope.created_at.isoformat(),
    }
    if detail:
        data["funding_legs"] = [_funding(leg) for leg in envelope.funding_legs.order_by("sequence")]
        data["debits"] = [_debit(d) for d in envelope.debits.order_by("created_at", "id")]
        data["refunds"] = [
            refund_summary(op)
            for op in envelope.refunds.order_by("-created_at", "-id").prefetch_related("legs")
        ]
    return with_usd(data)


def _leg(leg: RefundLeg) -> dict[str, Any]:
    run = leg.verification_run
    return {
        "leg_id": leg.public_id,
        "charge": leg.funding_leg.charge_id,
        "amount_micro": leg.amount_micro,
        "provider_refund_id": leg.provider_refund_id or None,
        "outcome": leg.outcome,
        "error_code": leg.error_code or None,
        "released": leg.released,
        "verification_verdict": run.verdict if run is not None else None,
        "verification_run": run.public_id if run is not None else None,
    }


def refund_status(legs: list[RefundLeg]) -> str:
    """The provider's answers: a void leg (never made, released by an approved correction) counts
    as refused — its money is back."""
    outcomes = {
        LegOutcome.REFUSED if leg.outcome == LegOutcome.VOID else leg.outcome for leg in legs
    }
    if outcomes & {LegOutcome.RESERVED, LegOutcome.UNKNOWN}:
        return "pending"
    if outcomes == {LegOutcome.ACCEPTED}:
        return "refunded"
    if outcomes == {LegOutcome.REFUSED}:
        return "failed"
    return "partially_refunded"


def verification_status(legs: list[RefundLeg]) -> str:
    """pending until every accepted leg is decided; then verified, or attention; not_applicable
    when no leg was accepted (nothing reached the provider to be proven)."""
    accepted = [leg for leg in legs if leg.outcome == LegOutcome.ACCEPTED]
    verdicts = [
        leg.verification_run.verdict if leg.verification_run else "PENDING" for leg in accepted
    ]
    if (
        any(leg.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN) for leg in legs)
        or "PENDING" in verdicts
    ):
        return "pending"
    if not accepted:
        return "not_applicable"
    return "verified" if all(v == "VERIFIED" for v in verdicts) else "attention"


def refund_summary(operation: RefundOperation) -> dict[str, Any]:
    legs = list(operation.legs.all())
    return {
        "refund_id": operation.public_id,
        "status": refund_status(legs),
        "requested_micro": operation.requested_micro,
    }


def refund_data(operation: RefundOperation) -> dict[str, Any]:
    """The refund resource. Right after `envelope_refund` the legs are the ones it recorded (in
    memory), and the balances those its last record read back (or read now, if that record moved
    no money); otherwise everything is read in one query."""
    if operation.recorded_legs is not None:
        legs = sorted(operation.recorded_legs, key=lambda leg: leg.sequence)
        envelope = operation.recorded_envelope  # as the last record left it
        if envelope is None:  # plain SQL (core.db): the ORM spent more CPU building it than PG
            rows = db.execute([db.select(Envelope, "id = %s", [operation.envelope_id])])[0]
            envelope = db.instances(Envelope, rows)[0]
        return _refund_body(operation, legs, envelope)
    legs = list(
        operation.legs.select_related("funding_leg", "verification_run", "operation__envelope")
        # What the page shows of a run is its id and verdict, not its recorded evidence.
        .defer(
            "verification_run__input",
            "verification_run__action_result",
            "verification_run__correlation",
        )
        .order_by("sequence")
    )
    envelope = (
        legs[0].operation.envelope if legs else Envelope.objects.get(pk=operation.envelope_id)
    )
    return _refund_body(operation, legs, envelope)


def _refund_body(
    operation: RefundOperation, legs: list[RefundLeg], envelope: Envelope
) -> dict[str, Any]:
    refunded = sum(
        leg.amount_micro for leg in legs if leg.outcome == LegOutcome.ACCEPTED and not leg.released
    )
    failed = sum(leg.amount_micro for leg in legs if leg.released)
    pending = sum(
        leg.amount_micro for leg in legs if leg.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN)
    )
    return with_usd(
        {
            "refund_id": operation.public_id,
            "envelope_id": envelope.public_id,
            "status": refund_status(legs),
            "requested_micro": operation.requested_micro,
            "refunded_micro": refunded,
            "failed_micro": failed,
            "pending_micro": pending,
            "remainder_micro": operation.remainder_micro,
            "legs": [_leg(leg) for leg in legs],
            "verification_status": verification_status(legs),
            "balances": balances(envelope),
            "created_at": operation.created_at.isoformat(),
        }
    )


def refund_preview(*, envelope: Envelope, amount_micro: int | None) -> dict[str, Any]:
    """The refund `envelope_refund` would make now (SPEC §3): the same last-in-first-out
    allocation, each leg rounded down to a cent, read without locks and reserving nothing: what a
    person is shown before confirming (SPEC §16). `amount_micro` None: the whole unspent balance.
    Refuses as the refund would: `amount_exceeds_unspent`, `nothing_to_refund`. Pass an envelope
    read just now: the preview is of the figures it holds."""
    allocation = refund_allocate(envelope, amount_micro)
    return with_usd(
        {
            "requested_micro": allocation.requested,
            "legs": [
                {
                    "funding_id": leg.public_id,
                    "kind": leg.kind,
                    "sequence": leg.sequence,
                    "charge": leg.charge_id or None,
                    "amount_micro": amount,
                }
                for leg, amount in allocation.legs
            ],
            "total_micro": allocation.total,
            "remainder_micro": allocation.requested - allocation.total,
            "unspent_micro": envelope.unspent_micro,
        }
    )


# --- the ledger check -------------------------------------------------------------------------


@dataclass(frozen=True)
class Breach:
    envelope: str
    balance: str
    stored: int
    from_journal: int
    from_legs: int


def _sum_by_envelope(queryset: QuerySet[Any], envelope_field: str, amount: str) -> Any:
    """One envelope's sum of `amount` over `queryset`, as a correlated subquery (0 when none)."""
    rows = (
        queryset.filter(**{envelope_field: OuterRef("pk")})
        .order_by()
        .values(envelope_field)
        .annotate(s=Sum(amount))
        .values("s")
    )
    return Coalesce(Subquery(rows, output_field=BigIntegerField()), Value(0))


def ledger_breaches(envelopes: QuerySet[Envelope] | None = None) -> list[Breach]:
    """Recompute the five balances from the journal and, independently, from the legs; report every
    envelope where either differs from the stored figures. One statement per 2,000 envelopes
    (each sum a correlated subquery), so a full check of many envelopes stays cheap."""
    journal = JournalEntry.objects.all()
    live_legs = RefundLeg.objects.filter(outcome=LegOutcome.ACCEPTED, released=False)
    open_legs = RefundLeg.objects.filter(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN))
    foreign = Adjustment.objects.filter(  # refunds made outside Vouch, recorded by an adjustment
        kind=AdjustmentKind.FOREIGN_REFUND,
        status=AdjustmentStatus.APPLIED,
        released_at__isnull=True,  # and not given back since (the provider showed them failed)
    )
    queryset = (envelopes if envelopes is not None else Envelope.objects.all()).order_by("id")
    annotated = queryset.annotate(
        j_funded=_sum_by_envelope(journal, "envelope", "funded_delta"),
        j_debited=_sum_by_envelope(journal, "envelope", "debited_delta"),
        j_refunded=_sum_by_envelope(journal, "envelope", "refunded_delta"),
        j_reserved=_sum_by_envelope(journal, "envelope", "reserved_delta"),
        j_unspent=_sum_by_envelope(journal, "envelope", "unspent_delta"),
        l_funded=_sum_by_envelope(
            FundingLeg.objects.filter(status=FundingStatus.SUCCEEDED), "envelope", "amount_micro"
        ),
        l_debited=_sum_by_envelope(Debit.objects.all(), "envelope", "amount_micro"),
        l_refunded=_sum_by_envelope(live_legs, "operation__envelope", "amount_micro"),
        l_foreign=_sum_by_envelope(foreign, "envelope", "amount_micro"),
        l_reserved=_sum_by_envelope(open_legs, "operation__envelope", "amount_micro"),
    )
    breaches = []
    for envelope in annotated.iterator(chunk_size=2000):
        e: Any = envelope
        refunded = e.l_refunded + e.l_foreign
        by_journal = {
            "total_funded_micro": e.j_funded,
            "total_debited_micro": e.j_debited,
            "total_refunded_micro": e.j_refunded,
            "reserved_micro": e.j_reserved,
            "unspent_micro": e.j_unspent,
        }
        from_legs = {
            "total_funded_micro": e.l_funded,
            "total_debited_micro": e.l_debited,
            "total_refunded_micro": refunded,
            "reserved_micro": e.l_reserved,
            "unspent_micro": e.l_funded - e.l_debited - refunded - e.l_reserved,
        }
        for name in BALANCES:
            stored = getattr(envelope, name)
            if stored != by_journal[name] or stored != from_legs[name]:
                breaches.append(
                    Breach(envelope.public_id, name, stored, by_journal[name], from_legs[name])
                )
    return breaches


# --- what a verification run is about ----------------------------------------------------------


def subject_of_run(run: VerificationRun) -> Subject | None:
    """The refund leg a `stripe.refund.created` run verifies, or the funding leg whose charge a
    `stripe.charge.succeeded` run reads back: both money (registered with verification)."""
    leg = RefundLeg.objects.filter(verification_run=run).only("public_id").first()
    if leg is not None:
        return Subject("refund_leg", leg.public_id, money=True)
    funding = FundingLeg.objects.filter(idempotency_key=run.operation_id).only("public_id").first()
    if funding is not None:
        return Subject("funding_leg", funding.public_id, money=True)
    return None


# --- what is stuck (SPEC §15.1: the console and the admin lists use the reconciliation's rule) ---


def stuck_before(now: datetime) -> datetime:
    """Legs started before this moment and still undecided are stuck."""
    return now - timedelta(seconds=settings.RECONCILIATION_STUCK_AFTER_S)


def funding_legs_stuck(*, now: datetime) -> QuerySet[FundingLeg]:
    """Funding legs still pending longer than `RECONCILIATION_STUCK_AFTER_S`."""
    return FundingLeg.objects.filter(status=FundingStatus.PENDING, created_at__lt=stuck_before(now))


def refund_legs_stuck(*, now: datetime) -> QuerySet[RefundLeg]:
    """Refund legs reserved or unknown longer than `RECONCILIATION_STUCK_AFTER_S`."""
    return RefundLeg.objects.filter(
        outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN), reserved_at__lt=stuck_before(now)
    )


# --- the admin's lists: pending funding and searching by amount --------------------------------


def envelopes_with_pending_funding(queryset: QuerySet[Envelope]) -> QuerySet[Envelope]:
    """Each envelope with `pending_funding_micro`: what its pending funding charges ask for (not
    funded money until the provider's answer shows it)."""
    pending = (
        FundingLeg.objects.filter(envelope=OuterRef("pk"), status=FundingStatus.PENDING)
        .order_by()
        .values("envelope")
        .annotate(total=Sum("amount_micro"))
        .values("total")
    )
    return queryset.annotate(
        pending_funding_micro=Coalesce(
            Subquery(pending, output_field=BigIntegerField()),
            Value(0),
            output_field=BigIntegerField(),
        )
    )


def envelopes_with_amount(amount_micro: int) -> QuerySet[Envelope]:
    """Envelopes where `amount_micro` appears: a balance, a funding charge, a debit or a refund
    (requested, or one leg)."""
    balances = Q()
    for name in BALANCES:
        balances |= Q(**{name: amount_micro})
    return Envelope.objects.filter(
        balances
        | Q(pk__in=FundingLeg.objects.filter(amount_micro=amount_micro).values("envelope"))
        | Q(pk__in=Debit.objects.filter(amount_micro=amount_micro).values("envelope"))
        | Q(pk__in=refunds_with_amount(amount_micro).values("envelope"))
    )


def refunds_with_amount(amount_micro: int) -> QuerySet[RefundOperation]:
    """Refund operations that asked for `amount_micro` or have a leg of that amount."""
    return RefundOperation.objects.filter(
        Q(requested_micro=amount_micro)
        | Q(pk__in=RefundLeg.objects.filter(amount_micro=amount_micro).values("operation"))
    )


# --- one timeline per envelope -------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineItem:
    """One dated thing that happened to an envelope, as the admin page lists it."""

    at: datetime
    kind: str  # journal, funding, provider, debit, refund, attempt, verdict, webhook, adjustment,
    # escalation
    title: str
    detail: str = ""
    provider_ids: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (label, admin URL)
    tone: str = "neutral"
    rank: int = 0  # among items of one instant: the order they happened in


def _admin_url(name: str, pk: Any) -> str:
    # By name, not by import: the pages live in apps above this one (receipts, reconciliation).
    return reverse(f"admin:{name}", args=[pk])


def _receipts_url(provider_id: str) -> str:
    return f"{reverse('admin:receipts_receipt_changelist')}?{urlencode({'q': provider_id})}"


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
                    title=f"Stripe answered: charge {funding.status}",
                    detail=f"{funding.public_id} funded",
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
                    title="No answer to trust: unknown (the money stays reserved)",
                    detail=f"{leg.public_id} after {leg.attempts} attempt(s)"
                    + (f" · {leg.error_code}" if leg.error_code else ""),
                    links=operation_link,
                    tone="warn",
                    rank=5,
                )
            )
        if leg.decided_at is not None:
            tone = {"accepted": "good", "refused": "bad", "void": "bad"}.get(leg.outcome, "warn")
            answer = leg.outcome + (f" ({leg.error_code})" if leg.error_code else "")
            links: tuple[tuple[str, str], ...] = operation_link
            if leg.provider_refund_id:
                links = (*links, ("receipts", _receipts_url(leg.provider_refund_id)))
            items.append(
                TimelineItem(
                    at=leg.decided_at,
                    kind="provider",
                    title=f"Stripe answered: {answer}",
                    detail=f"{leg.public_id} after {leg.attempts} attempt(s)",
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
        items.append(
            TimelineItem(
                at=entry.created_at,
                kind="journal",
                title=f"Journal: {entry.kind}",
                detail=" · ".join(p for p in (_deltas_text(entry), about, entry.note) if p),
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
                title=f"Verification attempt {attempt.number} ({attempt.trigger}): "
                f"{attempt.verdict}",
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
                title=f"Verdict {run.verdict}"
                + (f" · {run.verdict_class}" if run.verdict_class else ""),
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
                    title=f"Stripe event {event.type}"
                    + (f" ({event.source})" if getattr(event, "source", "") else ""),
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
                    title=f"Adjustment {adjustment.status}",
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
                title=f"Escalation opened: {escalation.verdict}"
                + (f" · {escalation.verdict_class}" if escalation.verdict_class else ""),
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
                    title=f"Escalation resolved ({escalation.resolution or 'resolved'})",
                    detail=escalation.resolution_note[:160],
                    links=link,
                    tone="good",
                    rank=13,
                )
            )
    return sorted(items, key=lambda item: (item.at, item.rank))


_VERDICT_TONES = {
    "VERIFIED": "good",
    "CONTRADICTED": "bad",
    "FAILED": "bad",
    "UNVERIFIABLE": "bad",
    "PENDING": "warn",
}
