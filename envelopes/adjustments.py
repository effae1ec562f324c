"""The one adjustment service (SPEC §15.4): the only way a person changes balances. One person
proposes a correcting journal entry of kind `adjust`; another, with
`reconciliation.approve_adjustment`, approves it, confirming the amount shown; it is then written
under the envelope's lock, keeping the ledger invariant. Escalations about money resolve this way,
as reconciliation's discrepancies will.

Every correction that names a provider object (a refund, a PaymentIntent) reads it from the
provider when proposed and again when approved, outside any transaction: Vouch believes only what
the provider can be shown to hold. A leg whose idempotency key the provider may still honour is
never corrected by hand: Vouch itself may still send it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.exceptions import InvalidInput, PermissionDenied
from core.services import audit_record
from envelopes.exceptions import (
    AdjustmentAlreadyDecided,
    AdjustmentAmountMismatch,
    AdjustmentNotApplicable,
    AdjustmentProviderMismatch,
    AdjustmentProviderUnreadable,
    AdjustmentSelfApproval,
)
from envelopes.locks import lock_envelope, lock_leg
from envelopes.models import (
    MICRO_PER_CENT,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.money import to_cents
from envelopes.services import (
    PROVIDER_KEY_TTL,
    REFUND_CONTRACT,
    _funding_move,
    _move,
    _provider,
    charge_run_start,
)
from envelopes.signals import adjustment_applied
from verification import clock
from verification.models import Escalation, EscalationStatus
from verification.services import escalation_resolve, verification_start

if TYPE_CHECKING:
    from accounts.models import User

_T = TypeVar("_T")
PROPOSE_PERMISSION = "envelopes.add_adjustment"
APPROVE_PERMISSION = "reconciliation.approve_adjustment"
_OPEN = (LegOutcome.RESERVED, LegOutcome.UNKNOWN)
_NAMES_A_REFUND = (AdjustmentKind.LEG_ACCEPT, AdjustmentKind.FOREIGN_REFUND)
_GONE = ("failed", "canceled")


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


# --- reading the provider (never inside a transaction) -----------------------------------------


def _read_refund(refund_id: str) -> dict[str, Any]:
    if not refund_id.startswith("re_"):
        raise InvalidInput("Name the provider refund (re_…).", details={"provider_object_id": []})
    read = _provider().refund_read(refund_id)
    if read.refused:
        raise AdjustmentProviderMismatch(
            f"The provider has no refund {refund_id}.", details={"provider_object_id": refund_id}
        )
    if not read.accepted:
        raise AdjustmentProviderUnreadable(details={"provider_code": read.error_code})
    return dict(read.require())


def _read_intent(intent_id: str) -> dict[str, Any]:
    if not intent_id.startswith("pi_"):
        raise InvalidInput("Name the PaymentIntent (pi_…).", details={"provider_object_id": []})
    read = _provider().payment_intent_read(intent_id)
    if read.refused:
        raise AdjustmentProviderMismatch(
            f"The provider has no PaymentIntent {intent_id}.",
            details={"provider_object_id": intent_id},
        )
    if not read.accepted:
        raise AdjustmentProviderUnreadable(details={"provider_code": read.error_code})
    return dict(read.require())


def _mismatch(message: str, **details: Any) -> AdjustmentProviderMismatch:
    return AdjustmentProviderMismatch(message, details=details)


def _check_refund(kind: str, refund: dict[str, Any], subject: Subject) -> int:
    """The refund supports the correction: returns the amount it moves, in micro-dollars."""
    funding = subject.funding_leg
    charge = refund.get("charge")
    charge_id = str((charge.get("id") if isinstance(charge, dict) else charge) or "")
    if funding is None or charge_id != funding.charge_id:
        raise _mismatch(
            f"Refund {refund.get('id')} is on charge {charge_id or '(none)'}, not on this leg's "
            f"charge {funding.charge_id if funding else '(none)'}.",
            provider_charge=charge_id,
        )
    if refund.get("status") in _GONE:
        raise _mismatch(
            f"Refund {refund.get('id')} is {refund.get('status')}: it gave nothing back.",
            provider_status=refund.get("status"),
        )
    if RefundLeg.objects.filter(provider_refund_id=str(refund.get("id"))).exists():
        raise _mismatch(f"Refund {refund.get('id')} is recorded on a refund leg already.")
    named = (refund.get("metadata") or {}).get("vouch_leg")
    amount = int(refund.get("amount") or 0)
    if kind == AdjustmentKind.LEG_ACCEPT:
        leg = subject.refund_leg
        leg = _need(leg)
        if named not in (None, "", leg.public_id):
            raise _mismatch(f"Refund {refund.get('id')} names another leg ({named}).")
        if amount != to_cents(leg.amount_micro):
            raise _mismatch(
                f"Refund {refund.get('id')} is for {amount} cents; the leg is for "
                f"{to_cents(leg.amount_micro)}.",
                provider_amount=amount,
            )
        return leg.amount_micro
    if named and not _is_second_refund_of(named, str(refund.get("id"))):
        raise _mismatch(
            f"Refund {refund.get('id')} carries Vouch's metadata (leg {named}): it is not foreign."
        )
    return amount * MICRO_PER_CENT


def _is_second_refund_of(leg_id: str, refund_id: str) -> bool:
    """A refund naming a leg that records another refund is a duplicate: money that left outside
    the leg, recorded like a foreign refund."""
    recorded = RefundLeg.objects.filter(public_id=leg_id).values_list(
        "provider_refund_id", flat=True
    )
    return any(existing not in ("", refund_id) for existing in recorded)


def _check_intent(intent: dict[str, Any], funding: FundingLeg) -> None:
    named = (intent.get("metadata") or {}).get("vouch_funding")
    if named not in (None, "", funding.public_id):
        raise _mismatch(f"PaymentIntent {intent.get('id')} names another funding leg ({named}).")
    if intent.get("status") != "succeeded":
        raise _mismatch(
            f"PaymentIntent {intent.get('id')} is {intent.get('status')}, not succeeded.",
            provider_status=intent.get("status"),
        )
    if intent.get("amount") != to_cents(funding.amount_micro):
        raise _mismatch(
            f"PaymentIntent {intent.get('id')} is for {intent.get('amount')} cents; the leg is "
            f"for {to_cents(funding.amount_micro)}.",
            provider_amount=intent.get("amount"),
        )


def _provider_evidence(
    kind: str, provider_object_id: str, subject: Subject
) -> tuple[dict[str, Any], int]:
    """Read and check the provider object a correction names; returns it and the amount moved."""
    if kind in _NAMES_A_REFUND:
        refund = _read_refund(provider_object_id)
        return refund, _check_refund(kind, refund, subject)
    if kind == AdjustmentKind.FUNDING_ACCEPT:
        funding = _need(subject.funding_leg)
        intent = _read_intent(provider_object_id)
        _check_intent(intent, funding)
        return intent, funding.amount_micro
    if kind in (AdjustmentKind.LEG_RELEASE, AdjustmentKind.LEG_REVERSE):
        return {}, _need(subject.refund_leg).amount_micro
    return {}, 0  # funding_abandon, confirm: no money moves


# --- proposing ------------------------------------------------------------------------------


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
    fit the leg as it stands, or when the provider's object does not support it."""
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
    provider_object, amount = _provider_evidence(kind, provider_object_id, subject)
    with transaction.atomic():
        envelope = lock_envelope(subject.envelope.pk)
        fresh = _refresh(subject, envelope)
        _check_applicable(kind, fresh)
        try:
            with transaction.atomic():
                adjustment = Adjustment.objects.create(
                    envelope=envelope,
                    kind=kind,
                    amount_micro=amount,
                    refund_leg=fresh.refund_leg,
                    funding_leg=fresh.funding_leg if fresh.refund_leg is None else None,
                    provider_object_id=provider_object_id if provider_object else "",
                    provider_object=provider_object,
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
        leg = subject.refund_leg or subject.funding_leg
        state = getattr(leg, "outcome", None) or getattr(leg, "status", "")
        fits = ", ".join(allowed) or (
            "nothing yet: Vouch may still use its idempotency key; wait until it expires"
        )
        raise AdjustmentNotApplicable(
            f"A {kind} adjustment does not fit {getattr(leg, 'public_id', 'this')} as it stands "
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


# --- deciding ---------------------------------------------------------------------------------


def adjustment_approve(
    *, adjustment: Adjustment, actor: User, confirmed_amount_micro: Any, note: str = ""
) -> Adjustment:
    """A second person, with `reconciliation.approve_adjustment`, approves the correction after
    confirming its amount; the one `adjust` journal entry is written under the envelope's lock
    and the escalation it answers is resolved as `adjusted`. The provider object it names is read
    again first: a refund that has failed since it was proposed is no longer a reason."""
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
    provider_object, amount = _provider_evidence(
        adjustment.kind, adjustment.provider_object_id, subject
    )
    if amount != adjustment.amount_micro:
        raise _mismatch("The provider now shows another amount than when this was proposed.")
    with transaction.atomic():
        envelope = lock_envelope(adjustment.envelope_id)
        locked = Adjustment.objects.select_for_update(of=("self",)).get(pk=adjustment.pk)
        if locked.status != AdjustmentStatus.PROPOSED:
            raise AdjustmentAlreadyDecided(details={"status": locked.status})
        fresh = _refresh(subject, envelope)
        _check_applicable(locked.kind, fresh)
        _apply(locked, fresh, provider_object or locked.provider_object)
        locked.status = AdjustmentStatus.APPLIED
        locked.decided_by = actor
        locked.decided_at = timezone.now()
        locked.decision_note = note.strip()
        if provider_object:
            locked.provider_object = provider_object
        locked.save()
        if locked.escalation is not None and locked.escalation.status == EscalationStatus.OPEN:
            escalation_resolve(
                escalation=locked.escalation,
                actor=actor,
                note=f"Adjusted by {locked.public_id} ({locked.kind}, "
                f"{locked.amount_micro:,} micro), proposed by {locked.proposed_by}: "
                f"{locked.reason}" + (f" Approved: {locked.decision_note}" if note else ""),
                adjustment=locked.public_id,
            )
        adjustment_applied.send(sender=Adjustment, adjustment=locked)
        audit_record(
            actor=actor,
            action="adjustment.approve",
            target_type="envelope",
            target_id=envelope.public_id,
            details={**_audit_details(locked), "confirmed_amount_micro": confirmed_amount_micro},
        )
    return locked


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
        locked.status = AdjustmentStatus.REJECTED
        locked.decided_by = actor
        locked.decided_at = timezone.now()
        locked.decision_note = note
        locked.save(update_fields=["status", "decided_by", "decided_at", "decision_note"])
        audit_record(
            actor=actor,
            action="adjustment.reject",
            target_type="envelope",
            target_id=locked.envelope.public_id,
            details={**_audit_details(locked), "note": note},
        )
    return locked


def _apply(adjustment: Adjustment, subject: Subject, provider_object: dict[str, Any]) -> None:
    """Write the correction: the leg's new state, the funding leg's amounts, and the one `adjust`
    journal entry (the database checks that the balances still add up and none goes negative)."""
    envelope, leg, funding = subject.envelope, subject.refund_leg, subject.funding_leg
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
        latest = provider_object.get("latest_charge")
        funding.status = FundingStatus.SUCCEEDED
        funding.payment_intent_id = adjustment.provider_object_id
        funding.charge_id = str((latest.get("id") if isinstance(latest, dict) else latest) or "")
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
        note=f"{kind} {adjustment.public_id}"[:200],
        refund_leg=leg if about_the_leg else None,
        funding_leg=None if about_the_leg else funding,
        adjustment=adjustment,
        **deltas,
    )
