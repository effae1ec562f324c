"""What a verification run is about, what is stuck (SPEC §15.1: the console and the admin lists
use the reconciliation's rule), the admin's lists (pending funding, searching by amount) and the
money a provider dispute moved (SPEC §18), for the disputes' pages."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import BigIntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from envelopes.models import (
    BALANCES,
    Debit,
    DisputeFunds,
    Envelope,
    FundingLeg,
    FundingStatus,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from verification.models import VerificationRun
from verification.subjects import Subject

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


# --- the money a provider dispute moved (SPEC §18) -----------------------------------------------


def dispute_funds_of(provider_dispute_id: str) -> DisputeFunds | None:
    """What a chargeback moved of its charge's money (held, exposure, charged back, with the
    escalation and the provider read last cited), by the provider's dispute id; None when Stripe
    withdrew nothing for it (an inquiry) or it is on no charge of Vouch's."""
    if not provider_dispute_id:
        return None
    return (
        DisputeFunds.objects.select_related("envelope", "funding_leg", "escalation", "last_read")
        .filter(provider_dispute_id=provider_dispute_id)
        .first()
    )
