"""Proposing a correction: one person, with `envelopes.add_adjustment`, names the leg, the kind
and the reason; the provider is read and the read kept on the proposal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from core.exceptions import InvalidInput, PermissionDenied
from core.services import audit_record
from envelopes.adjustments.evidence import _NAMES_A_REFUND, _provider_evidence
from envelopes.adjustments.subjects import (
    Subject,
    _audit_details,
    _check_applicable,
    _refresh,
    subject_of_escalation,
)
from envelopes.exceptions import AdjustmentNotApplicable
from envelopes.locks import lock_envelope
from envelopes.models import (
    Adjustment,
    AdjustmentKind,
    FundingLeg,
    RefundLeg,
)
from verification.models import Escalation, EscalationStatus

if TYPE_CHECKING:
    from accounts.models import User


PROPOSE_PERMISSION = "envelopes.add_adjustment"


def adjustment_propose(
    *,
    actor: User,
    kind: str,
    reason: str,
    escalation: Escalation | None = None,
    refund_leg: RefundLeg | None = None,
    funding_leg: FundingLeg | None = None,
    provider_object_id: str = "",
) -> Adjustment:
    """Propose one correction of a leg (or of the leg an escalation names), with the reason.
    Refused: without `envelopes.add_adjustment`, with an empty reason, for a kind that does not
    fit the leg as it stands, or when what the provider shows does not support it (the read is
    stored either way, and kept on the proposal as `proposal_read`)."""
    if not actor.has_perm(PROPOSE_PERMISSION):
        raise PermissionDenied(f"Proposing an adjustment needs {PROPOSE_PERMISSION}.")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("Say why: a proposal needs a reason.", details={"reason": []})
    if kind not in AdjustmentKind.values:
        raise InvalidInput(f"Unknown kind {kind!r}.", details={"kind": AdjustmentKind.values})
    if escalation is not None:
        if escalation.status != EscalationStatus.OPEN:
            raise AdjustmentNotApplicable("This escalation is resolved already.")
        subject = subject_of_escalation(escalation)
    elif refund_leg is not None:
        subject = Subject(
            refund_leg.operation.envelope, refund_leg=refund_leg, funding_leg=refund_leg.funding_leg
        )
    elif funding_leg is not None:
        subject = Subject(funding_leg.envelope, funding_leg=funding_leg)
    else:
        raise InvalidInput("Name an escalation, a refund leg or a funding leg.")
    _check_applicable(kind, subject)
    provider_object_id = (provider_object_id or "").strip()
    if kind in (*_NAMES_A_REFUND, AdjustmentKind.FUNDING_ACCEPT) and not provider_object_id:
        raise InvalidInput(
            "Name the provider object this correction rests on.",
            details={"provider_object_id": ["Required for this kind."]},
        )
    evidence = _provider_evidence(kind, provider_object_id, subject, purpose="adjustment.propose")
    with transaction.atomic():
        envelope = lock_envelope(subject.envelope.pk)
        fresh = _refresh(subject, envelope)
        _check_applicable(kind, fresh)
        try:
            with transaction.atomic():
                adjustment = Adjustment.objects.create(
                    envelope=envelope,
                    kind=kind,
                    amount_micro=evidence.amount,
                    refund_leg=fresh.refund_leg,
                    funding_leg=fresh.funding_leg if fresh.refund_leg is None else None,
                    provider_object_id=provider_object_id if evidence.provider_object else "",
                    provider_object=evidence.provider_object,
                    proposal_read=evidence.read,
                    escalation=escalation,
                    reason=reason,
                    proposed_by=actor,
                )
        except IntegrityError as exc:
            raise AdjustmentNotApplicable(
                "Another adjustment of this leg is waiting for approval, or this provider object "
                "is named by another adjustment already."
            ) from exc
        audit_record(
            actor=actor,
            action="adjustment.propose",
            target_type="envelope",
            target_id=envelope.public_id,
            details=_audit_details(adjustment),
        )
    return adjustment
