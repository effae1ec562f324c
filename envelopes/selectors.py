"""Reads: what the API shows of envelopes and refunds, and the ledger check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import BigIntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

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
from verification.subjects import Subject

if TYPE_CHECKING:
    from accounts.models import User
    from verification.models import VerificationRun


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
    memory) and only the balances are read again; otherwise everything is read in one query."""
    if operation.recorded_legs is not None:
        legs = sorted(operation.recorded_legs, key=lambda leg: leg.sequence)
        envelope = Envelope.objects.only("public_id", *BALANCES).get(pk=operation.envelope_id)
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
        kind=AdjustmentKind.FOREIGN_REFUND, status=AdjustmentStatus.APPLIED
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
