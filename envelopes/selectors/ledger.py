"""The ledger check: every stored balance equals the journal's sum and the legs' (SPEC §2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import BigIntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from envelopes.models import (
    BALANCES,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    Debit,
    DisputeFunds,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)


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
    """Recompute the seven balances from the journal and, independently, from the legs and the
    disputes' funds rows (held and charged back: SPEC §18); report every envelope where either
    differs from the stored figures. One statement per 2,000 envelopes
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
        j_held=_sum_by_envelope(journal, "envelope", "held_delta"),
        j_charged_back=_sum_by_envelope(journal, "envelope", "charged_back_delta"),
        l_funded=_sum_by_envelope(
            FundingLeg.objects.filter(status=FundingStatus.SUCCEEDED), "envelope", "amount_micro"
        ),
        l_debited=_sum_by_envelope(Debit.objects.all(), "envelope", "amount_micro"),
        l_refunded=_sum_by_envelope(live_legs, "operation__envelope", "amount_micro"),
        l_foreign=_sum_by_envelope(foreign, "envelope", "amount_micro"),
        l_reserved=_sum_by_envelope(open_legs, "operation__envelope", "amount_micro"),
        l_held=_sum_by_envelope(DisputeFunds.objects.all(), "envelope", "held_micro"),
        l_charged_back=_sum_by_envelope(
            DisputeFunds.objects.all(), "envelope", "charged_back_micro"
        ),
        f_held=_sum_by_envelope(FundingLeg.objects.all(), "envelope", "held_micro"),
        f_charged_back=_sum_by_envelope(FundingLeg.objects.all(), "envelope", "charged_back_micro"),
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
            "held_micro": e.j_held,
            "charged_back_micro": e.j_charged_back,
        }
        from_legs = {
            "total_funded_micro": e.l_funded,
            "total_debited_micro": e.l_debited,
            "total_refunded_micro": refunded,
            "reserved_micro": e.l_reserved,
            "unspent_micro": e.l_funded
            - e.l_debited
            - refunded
            - e.l_reserved
            - e.l_held
            - e.l_charged_back,
            "held_micro": e.f_held,
            "charged_back_micro": e.f_charged_back,
        }
        # The disputes' funds rows must say what their funding legs say, too.
        by_disputes = {"held_micro": e.l_held, "charged_back_micro": e.l_charged_back}
        for name in BALANCES:
            stored = getattr(envelope, name)
            if stored != by_journal[name] or stored != from_legs[name]:
                breaches.append(
                    Breach(envelope.public_id, name, stored, by_journal[name], from_legs[name])
                )
            elif name in by_disputes and stored != by_disputes[name]:
                breaches.append(
                    Breach(envelope.public_id, name, stored, by_journal[name], by_disputes[name])
                )
    return breaches
