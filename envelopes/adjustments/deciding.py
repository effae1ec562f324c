"""Deciding a correction: a second person approves it (the one `adjust` journal entry, under the
envelope's lock) or it is rejected or withdrawn; nothing moves then."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput, PermissionDenied
from core.services import audit_record
from core.transitions import transition
from envelopes.adjustments.evidence import _Evidence, _mismatch, _provider_evidence
from envelopes.adjustments.subjects import (
    Subject,
    _audit_details,
    _check_applicable,
    _need,
    _refresh,
)
from envelopes.exceptions import (
    AdjustmentAlreadyDecided,
    AdjustmentAmountMismatch,
    AdjustmentNotApplicable,
    AdjustmentSelfApproval,
)
from envelopes.locks import lock_envelope
from envelopes.models import (
    ADJUSTMENT_STATUS,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.money import to_cents
from envelopes.services.funding import charge_run_start
from envelopes.services.journal import _funding_move, _move
from envelopes.services.refunds import REFUND_CONTRACT
from envelopes.signals import adjustment_applied
from verification.models import EscalationStatus
from verification.services import escalation_held_by, escalation_resolve, verification_start

if TYPE_CHECKING:
    from accounts.models import User


APPROVE_PERMISSION = "reconciliation.approve_adjustment"


def adjustment_approve(
    *, adjustment: Adjustment, actor: User, confirmed_amount_micro: Any, note: str = ""
) -> Adjustment:
    """A second person, with `reconciliation.approve_adjustment`, approves the correction after
    confirming its amount; the one `adjust` journal entry is written under the envelope's lock
    and the escalation it answers is resolved as `adjusted` unless something else still rests on
    it (`_escalation_answered`). The provider is read again first
    (outside any transaction) and that read is stored and cited on the entry: a refund that has
    failed since it was proposed is no longer a reason, and a refund or payment carrying the leg
    that appeared since stops a release, a reverse or an abandon."""
    if adjustment.proposed_by_id == actor.pk:
        raise AdjustmentSelfApproval()
    if not actor.has_perm(APPROVE_PERMISSION):
        raise PermissionDenied(f"Approving an adjustment needs {APPROVE_PERMISSION}.")
    if adjustment.status != AdjustmentStatus.PROPOSED:
        raise AdjustmentAlreadyDecided(details={"status": adjustment.status})
    if (
        not isinstance(confirmed_amount_micro, int)
        or isinstance(confirmed_amount_micro, bool)
        or confirmed_amount_micro != adjustment.amount_micro
    ):
        raise AdjustmentAmountMismatch(
            details={"amount_micro": adjustment.amount_micro, "confirmed": confirmed_amount_micro}
        )
    subject = Subject(
        adjustment.envelope,
        refund_leg=adjustment.refund_leg,
        funding_leg=adjustment.funding_leg
        or (adjustment.refund_leg.funding_leg if adjustment.refund_leg else None),
    )
    evidence = _provider_evidence(
        adjustment.kind, adjustment.provider_object_id, subject, purpose="adjustment.approve"
    )
    if evidence.amount != adjustment.amount_micro:
        raise _mismatch("The provider now shows another amount than when this was proposed.")
    with transaction.atomic():
        envelope = lock_envelope(adjustment.envelope_id)
        locked = Adjustment.objects.select_for_update(of=("self",)).get(pk=adjustment.pk)
        if locked.status != AdjustmentStatus.PROPOSED:
            raise AdjustmentAlreadyDecided(details={"status": locked.status})
        fresh = _refresh(subject, envelope)
        _check_applicable(locked.kind, fresh)
        _apply(locked, fresh, evidence)
        decided: dict[str, Any] = {
            "decided_by": actor,
            "decided_at": timezone.now(),
            "decision_note": note.strip(),
            "approval_read": evidence.read,
        }
        if evidence.provider_object:
            decided["provider_object"] = evidence.provider_object
        transition(
            locked,
            machine=ADJUSTMENT_STATUS,
            to=AdjustmentStatus.APPLIED,
            actor=actor,
            action="adjustment.approve",
            also=decided,
            details={
                "envelope": envelope.public_id,
                **_audit_details(locked),
                "confirmed_amount_micro": confirmed_amount_micro,
            },
        )
        # Its listeners first (the discrepancies it answers are resolved), then its escalation.
        adjustment_applied.send(sender=Adjustment, adjustment=locked)
        _escalation_answered(locked, actor=actor)
    return locked


def _escalation_answered(adjustment: Adjustment, *, actor: User) -> None:
    """The escalation the approved adjustment answers is resolved as `adjusted` — only when
    nothing else still rests on it (`escalation_held_by`, the rule reconciliation's clearing
    follows too: two Dashboard refunds on one charge are two discrepancies under one escalation,
    and recording one leaves the other's money in the queue). Kept open, it says why in the audit
    trail. No other unapplied adjustment can rest on it: an escalation's adjustments are all of
    its one leg, and a leg has one proposal at a time (a database constraint)."""
    escalation = adjustment.escalation
    if escalation is None or escalation.status != EscalationStatus.OPEN:
        return
    held = escalation_held_by(escalation)
    if held:
        audit_record(
            actor=actor,
            action="escalation.kept_open",
            target_type="escalation",
            target_id=str(escalation.pk),
            details={"adjustment": adjustment.public_id, "still_resting_on_it": held},
        )
        return
    said = (
        f"Adjusted by {adjustment.public_id} ({adjustment.kind}, "
        f"{adjustment.amount_micro:,} micro), proposed by {adjustment.proposed_by}: "
        f"{adjustment.reason}"
    )
    if adjustment.decision_note:
        said = f"{said} Approved: {adjustment.decision_note}"
    escalation_resolve(
        escalation=escalation, actor=actor, note=said, adjustment=adjustment.public_id
    )


def adjustment_reject(*, adjustment: Adjustment, actor: User, note: str) -> Adjustment:
    """An approver turns the proposal down (or its proposer withdraws it), with a note. Nothing
    moves; the escalation stays open for another resolution."""
    if adjustment.proposed_by_id != actor.pk and not actor.has_perm(APPROVE_PERMISSION):
        raise PermissionDenied(f"Rejecting an adjustment needs {APPROVE_PERMISSION}.")
    note = (note or "").strip()
    if not note:
        raise InvalidInput("Say why: a rejection needs a note.", details={"note": []})
    with transaction.atomic():
        locked = Adjustment.objects.select_for_update(of=("self",)).get(pk=adjustment.pk)
        if locked.status != AdjustmentStatus.PROPOSED:
            raise AdjustmentAlreadyDecided(details={"status": locked.status})
        transition(
            locked,
            machine=ADJUSTMENT_STATUS,
            to=AdjustmentStatus.REJECTED,
            actor=actor,
            action="adjustment.reject",
            also={"decided_by": actor, "decided_at": timezone.now(), "decision_note": note},
            details={"envelope": locked.envelope.public_id, **_audit_details(locked), "note": note},
        )
    return locked


def _apply(adjustment: Adjustment, subject: Subject, evidence: _Evidence) -> None:
    """Write the correction: the leg's new state, the funding leg's amounts, and the one `adjust`
    journal entry, citing the approval's read of the provider (the database checks that the
    balances still add up and none goes negative)."""
    envelope, leg, funding = subject.envelope, subject.refund_leg, subject.funding_leg
    provider_object = evidence.provider_object
    amount = adjustment.amount_micro
    kind = adjustment.kind
    now = timezone.now()
    deltas: dict[str, int] = {}
    if kind == AdjustmentKind.LEG_RELEASE:
        leg = _need(leg)
        RefundLeg.objects.filter(pk=leg.pk).update(
            outcome=LegOutcome.VOID, released=True, decided_at=now, error_code="not_at_provider"
        )
        _funding_move(leg.funding_leg_id, reserved=-amount)
        deltas = {"reserved": -amount, "unspent": amount}
    elif kind == AdjustmentKind.LEG_ACCEPT:
        leg = _need(leg)
        run = verification_start(
            contract_id=REFUND_CONTRACT,
            operation_id=leg.idempotency_key,
            operation_created_at=leg.reserved_at,
            input={"charge": leg.funding_leg.charge_id, "amount": to_cents(leg.amount_micro)},
            action_result=provider_object,
        )
        RefundLeg.objects.filter(pk=leg.pk).update(
            outcome=LegOutcome.ACCEPTED,
            provider_refund_id=adjustment.provider_object_id,
            decided_at=now,
            error_code="",
            verification_run=run,
        )
        _funding_move(leg.funding_leg_id, reserved=-amount, refunded=amount)
        deltas = {"reserved": -amount, "refunded": amount}
    elif kind == AdjustmentKind.LEG_REVERSE:
        leg = _need(leg)
        RefundLeg.objects.filter(pk=leg.pk).update(released=True)
        _funding_move(leg.funding_leg_id, refunded=-amount)
        deltas = {"refunded": -amount, "unspent": amount}
    elif kind == AdjustmentKind.FOREIGN_REFUND:
        funding = _need(funding)
        if amount > envelope.unspent_micro or amount > funding.capacity_micro:
            raise AdjustmentNotApplicable(
                "The envelope cannot absorb this refund: it is more than its unspent money "
                f"({envelope.unspent_micro:,} micro) or than what is left of the charge "
                f"({funding.capacity_micro:,} micro). Resolve it another way.",
                details={"unspent_micro": envelope.unspent_micro},
            )
        _funding_move(funding.pk, refunded=amount)
        deltas = {"unspent": -amount, "refunded": amount}
    elif kind == AdjustmentKind.FUNDING_ACCEPT:
        funding = _need(funding)
        funding.status = FundingStatus.SUCCEEDED
        funding.payment_intent_id = adjustment.provider_object_id
        funding.charge_id = str(provider_object["latest_charge"])  # a succeeded one's (an id)
        funding.funded_at = now
        funding.save(update_fields=["status", "payment_intent_id", "charge_id", "funded_at"])
        charge_run_start(leg=funding, intent=provider_object)
        deltas = {"funded": amount, "unspent": amount}
    elif kind == AdjustmentKind.FUNDING_ABANDON:
        funding = _need(funding)
        FundingLeg.objects.filter(pk=funding.pk).update(status=FundingStatus.ABANDONED)
    about_the_leg = kind in (
        AdjustmentKind.LEG_RELEASE,
        AdjustmentKind.LEG_ACCEPT,
        AdjustmentKind.LEG_REVERSE,
    ) or (kind == AdjustmentKind.CONFIRM and leg is not None)
    _move(
        envelope,
        JournalEntry.Kind.ADJUST,
        note=f"{kind} {adjustment.public_id}",
        refund_leg=leg if about_the_leg else None,
        funding_leg=None if about_the_leg else funding,
        adjustment=adjustment,
        provider_read=evidence.read,
        **deltas,
    )
