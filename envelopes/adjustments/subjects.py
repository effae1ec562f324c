"""What a correction is about (a refund leg, or a funding leg, with its envelope), which
corrections fit a leg as it stands now, and what the audit rows say of an adjustment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from envelopes.exceptions import AdjustmentNotApplicable
from envelopes.locks import lock_leg
from envelopes.models import (
    Adjustment,
    AdjustmentKind,
    Envelope,
    FundingLeg,
    FundingStatus,
    LegOutcome,
    RefundLeg,
)
from envelopes.services.journal import PROVIDER_KEY_TTL
from verification import clock
from verification.models import Escalation

_T = TypeVar("_T")
_OPEN = (LegOutcome.RESERVED, LegOutcome.UNKNOWN)


@dataclass(frozen=True)
class Subject:
    """What a correction is about: a refund leg, or a funding leg (with its envelope)."""

    envelope: Envelope
    refund_leg: RefundLeg | None = None
    funding_leg: FundingLeg | None = None


def _need(value: _T | None) -> _T:
    if value is None:
        raise AdjustmentNotApplicable(
            "This correction needs a leg that this subject does not name."
        )
    return value


def _key_may_still_act(moment: Any) -> bool:
    return bool(clock.now() - moment <= PROVIDER_KEY_TTL)


def adjustment_kinds_for(
    *, refund_leg: RefundLeg | None = None, funding_leg: FundingLeg | None = None
) -> list[AdjustmentKind]:
    """The corrections that fit a leg as it stands now."""
    if refund_leg is not None:
        if refund_leg.outcome in _OPEN:
            if _key_may_still_act(refund_leg.reserved_at):
                return []  # Vouch may still send it: nobody corrects it by hand yet
            return [AdjustmentKind.LEG_RELEASE, AdjustmentKind.LEG_ACCEPT]
        if refund_leg.outcome == LegOutcome.ACCEPTED and not refund_leg.released:
            return [
                AdjustmentKind.LEG_REVERSE,
                AdjustmentKind.FOREIGN_REFUND,
                AdjustmentKind.CONFIRM,
            ]
        return [AdjustmentKind.CONFIRM]
    if funding_leg is not None:
        if funding_leg.status == FundingStatus.PENDING:
            if _key_may_still_act(funding_leg.created_at):
                return []
            return [AdjustmentKind.FUNDING_ACCEPT, AdjustmentKind.FUNDING_ABANDON]
        if funding_leg.status == FundingStatus.SUCCEEDED:
            return [AdjustmentKind.FOREIGN_REFUND, AdjustmentKind.CONFIRM]
        return [AdjustmentKind.CONFIRM]
    return []


def subject_of_escalation(escalation: Escalation) -> Subject:
    """The leg an escalation is about, or AdjustmentNotApplicable if it names none."""
    if escalation.subject_type == "refund_leg":
        leg = (
            RefundLeg.objects.select_related("operation__envelope", "funding_leg")
            .filter(public_id=escalation.subject_id)
            .first()
        )
        if leg is not None:
            return Subject(leg.operation.envelope, refund_leg=leg, funding_leg=leg.funding_leg)
    if escalation.subject_type == "funding_leg":
        funding = (
            FundingLeg.objects.select_related("envelope")
            .filter(public_id=escalation.subject_id)
            .first()
        )
        if funding is not None:
            return Subject(funding.envelope, funding_leg=funding)
    raise AdjustmentNotApplicable(
        "This escalation names no refund or funding leg: resolve it with a note.",
        details={"escalation": escalation.pk},
    )


def _refresh(subject: Subject, envelope: Envelope) -> Subject:
    refund_leg = lock_leg(subject.refund_leg.pk) if subject.refund_leg is not None else None
    funding = None
    if subject.funding_leg is not None:
        funding = FundingLeg.objects.select_for_update(of=("self",)).get(pk=subject.funding_leg.pk)
    return Subject(envelope, refund_leg=refund_leg, funding_leg=funding)


def _check_applicable(kind: str, subject: Subject) -> None:
    allowed = adjustment_kinds_for(
        refund_leg=subject.refund_leg,
        funding_leg=subject.funding_leg if subject.refund_leg is None else None,
    )
    if kind not in allowed:
        leg: RefundLeg | FundingLeg = subject.refund_leg or _need(subject.funding_leg)
        state = leg.outcome if isinstance(leg, RefundLeg) else leg.status
        fits = ", ".join(allowed) or (
            "nothing yet: Vouch may still use its idempotency key; wait until it expires"
        )
        raise AdjustmentNotApplicable(
            f"A {kind} adjustment does not fit {leg.public_id} as it stands "
            f"({state}). It allows: {fits}.",
            details={"kind": kind, "allowed": [str(k) for k in allowed]},
        )


def _audit_details(adjustment: Adjustment) -> dict[str, Any]:
    return {
        "adjustment": adjustment.public_id,
        "kind": adjustment.kind,
        "amount_micro": adjustment.amount_micro,
        "refund_leg": adjustment.refund_leg.public_id if adjustment.refund_leg else None,
        "funding_leg": adjustment.funding_leg.public_id if adjustment.funding_leg else None,
        "provider_object_id": adjustment.provider_object_id or None,
        "escalation": adjustment.escalation_id,
    }
