"""The one adjustment service (SPEC §15.4): the only way a person changes balances. One person
proposes a correcting journal entry of kind `adjust`; another, with
`reconciliation.approve_adjustment`, approves it, confirming the amount shown; it is then written
under the envelope's lock, keeping the ledger invariant. Escalations about money resolve this way,
as reconciliation's discrepancies will.

No correction against the provider's word: every correction but `confirm` reads the provider when
it is proposed and again when it is approved, outside any transaction; each read is stored (every
answer's bytes with their SHA-256: `ProviderRead`), kept on the adjustment (`proposal_read`,
`approval_read`) and cited by the journal entry the approval writes. A correction the provider
contradicts is refused with a code that says what it shows (envelopes.exceptions):

- an accept (`leg_accept`, `funding_accept`) or a `foreign_refund` needs the object it names, on
  the leg's charge, for the amount, live, and recorded on no other leg
  (`provider_object_already_recorded`);
- a release (`leg_release`) or a reverse (`leg_reverse`) needs every refund that carries the leg
  — its recorded refund, or one of the charge's refunds with its `vouch_leg` metadata — `failed`
  or `canceled`, or none at all (`provider_shows_refund_succeeded`,
  `provider_shows_refund_in_flight`; `provider_shows_no_charge` when the charge itself is not
  there). A recorded refund id the provider answers 404 for, on a charge it does hold, is a
  refund it does not hold: refunds are never deleted at Stripe, so the money never left through
  it;
- an abandon (`funding_abandon`) needs no PaymentIntent carrying the leg — its recorded one, or
  one with its `vouch_funding` metadata — that succeeded or may still succeed
  (`provider_shows_payment_succeeded`, `provider_shows_payment_in_flight`).

A leg whose idempotency key the provider may still honour is never corrected by hand: Vouch
itself may still send it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Q
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
    ProviderObjectAlreadyRecorded,
    ProviderShowsNoCharge,
    ProviderShowsPaymentInFlight,
    ProviderShowsPaymentSucceeded,
    ProviderShowsRefundInFlight,
    ProviderShowsRefundSucceeded,
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
    ProviderRead,
    RefundLeg,
)
from envelopes.money import to_cents
from envelopes.provider_reads import Answer, provider_read_store
from envelopes.services.funding import charge_run_start
from envelopes.services.journal import PROVIDER_KEY_TTL, _funding_move, _move, _provider
from envelopes.services.refunds import REFUND_CONTRACT
from envelopes.signals import adjustment_applied
from providers import Outcome, Page
from providers import ProviderUnavailable as PageUnreadable
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
_GONE = ("failed", "canceled")  # a refund that gave nothing back
_NO_PAYMENT = ("canceled", "requires_payment_method")  # a PaymentIntent that took nothing


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


class _Reading:
    """The answers of one read of the provider, kept as they come, to be stored with their
    SHA-256 whatever they show."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.shows: dict[str, Any] = {}

    def one(self, path: str, outcome: Outcome) -> Outcome:
        self.answers.append(Answer.of({"method": "GET", "path": path}, outcome))
        return outcome

    def pages(self, path: str, pages: Iterator[Page]) -> list[dict[str, Any]]:
        """Every object of a list, each page's answer kept; a page that cannot be read: the
        provider is unreadable."""
        found: list[dict[str, Any]] = []
        try:
            for page in pages:
                request = {"method": "GET", "path": path, "params": page.params}
                self.answers.append(Answer(request, "accepted", page.body, 200))
                found.extend(page.data)
        except PageUnreadable as exc:
            request = {"method": "GET", "path": path, "params": exc.params}
            self.answers.append(Answer.of(request, exc.outcome))
            raise _unreadable(exc.outcome) from exc
        return found


def _not_found(outcome: Outcome) -> bool:
    return outcome.refused and outcome.http_status == 404


def _unreadable(outcome: Outcome) -> AdjustmentProviderUnreadable:
    # The provider's message says what failed (a request with no answer: the URL it tried).
    said = " ".join((outcome.error_message or outcome.error_code or "no answer").split())
    return AdjustmentProviderUnreadable(
        f"The provider could not be read ({said}); nothing was changed. Try again.",
        details={"provider_code": outcome.error_code},
    )


def _summary(obj: dict[str, Any]) -> dict[str, Any]:
    return {"id": obj.get("id"), "status": obj.get("status"), "amount": obj.get("amount")}


def _read_refund(refund_id: str, reading: _Reading) -> dict[str, Any]:
    if not refund_id.startswith("re_"):
        raise InvalidInput("Name the provider refund (re_…).", details={"provider_object_id": []})
    read = reading.one(f"/v1/refunds/{refund_id}", _provider().refund_read(refund_id))
    if read.refused:
        raise AdjustmentProviderMismatch(
            f"The provider has no refund {refund_id}.", details={"provider_object_id": refund_id}
        )
    if not read.accepted:
        raise _unreadable(read)
    refund = dict(read.require())
    reading.shows["refund"] = _summary(refund)
    return refund


def _read_intent(intent_id: str, reading: _Reading) -> dict[str, Any]:
    if not intent_id.startswith("pi_"):
        raise InvalidInput("Name the PaymentIntent (pi_…).", details={"provider_object_id": []})
    read = reading.one(
        f"/v1/payment_intents/{intent_id}", _provider().payment_intent_read(intent_id)
    )
    if read.refused:
        raise AdjustmentProviderMismatch(
            f"The provider has no PaymentIntent {intent_id}.",
            details={"provider_object_id": intent_id},
        )
    if not read.accepted:
        raise _unreadable(read)
    intent = dict(read.require())
    reading.shows["payment_intent"] = _summary(intent)
    return intent


def _mismatch(message: str, **details: Any) -> AdjustmentProviderMismatch:
    return AdjustmentProviderMismatch(message, details=details)


def _check_refund(kind: str, refund: dict[str, Any], subject: Subject) -> int:
    """The refund supports the correction: returns the amount it moves, in micro-dollars."""
    funding = _need(subject.funding_leg)
    charge_id = str(refund.get("charge"))  # an id: Vouch never asks Stripe to expand it
    if charge_id != funding.charge_id:
        raise _mismatch(
            f"Refund {refund.get('id')} is on charge {charge_id}, not on this leg's charge "
            f"{funding.charge_id}.",
            provider_charge=charge_id,
        )
    if refund.get("status") in _GONE:
        raise _mismatch(
            f"Refund {refund.get('id')} is {refund.get('status')}: it gave nothing back.",
            provider_status=refund.get("status"),
        )
    if RefundLeg.objects.filter(provider_refund_id=str(refund.get("id"))).exists():
        raise ProviderObjectAlreadyRecorded(
            f"Refund {refund.get('id')} is recorded on a refund leg already."
        )
    named = (refund.get("metadata") or {}).get("vouch_leg")
    amount = int(refund["amount"])
    if kind == AdjustmentKind.LEG_ACCEPT:
        leg = subject.refund_leg
        leg = _need(leg)
        if named and named != leg.public_id:
            raise _mismatch(f"Refund {refund.get('id')} names another leg ({named}).")
        if amount != to_cents(leg.amount_micro):
            raise _mismatch(
                f"Refund {refund.get('id')} is for {amount} cents; the leg is for "
                f"{to_cents(leg.amount_micro)}.",
                provider_amount=amount,
            )
        return leg.amount_micro
    if named and not _leg_records_a_refund(named):
        raise _mismatch(
            f"Refund {refund.get('id')} carries Vouch's metadata (leg {named}): it is not foreign."
        )
    return amount * MICRO_PER_CENT


def _leg_records_a_refund(leg_id: str) -> bool:
    """A refund naming a leg that records a refund (another one: this one would be recorded on it
    already) is a duplicate: money that left outside the leg, recorded like a foreign refund."""
    return RefundLeg.objects.filter(public_id=leg_id).exclude(provider_refund_id="").exists()


def _check_intent(intent: dict[str, Any], funding: FundingLeg) -> None:
    intent_id = str(intent.get("id"))
    # Its charge too (an id; "None" before it charged, which no leg records).
    charge_id = str(intent.get("latest_charge"))
    recorded = Q(payment_intent_id=intent_id) | Q(charge_id=charge_id)
    other = FundingLeg.objects.exclude(pk=funding.pk).filter(recorded).first()
    if other is not None:
        raise ProviderObjectAlreadyRecorded(
            f"PaymentIntent {intent_id} (charge {charge_id}) is recorded on funding leg "
            f"{other.public_id} already: one payment is never counted twice.",
            details={"funding_leg": other.public_id},
        )
    named = (intent.get("metadata") or {}).get("vouch_funding")
    if named and named != funding.public_id:
        raise _mismatch(f"PaymentIntent {intent_id} names another funding leg ({named}).")
    if intent.get("status") != "succeeded":
        raise _mismatch(
            f"PaymentIntent {intent_id} is {intent.get('status')}, not succeeded.",
            provider_status=intent.get("status"),
        )
    if intent.get("amount") != to_cents(funding.amount_micro):
        raise _mismatch(
            f"PaymentIntent {intent_id} is for {intent.get('amount')} cents; the leg is "
            f"for {to_cents(funding.amount_micro)}.",
            provider_amount=intent.get("amount"),
        )


def _check_no_live_refund(leg: RefundLeg, reading: _Reading) -> None:
    """A release or reverse: every refund carrying the leg — its recorded refund (read by its id)
    and any of the charge's refunds with its `vouch_leg` — is failed or canceled, or there is
    none, on a charge the provider holds."""
    provider = _provider()
    charge_id = leg.funding_leg.charge_id
    carrying: dict[str, dict[str, Any]] = {}
    recorded = leg.provider_refund_id
    if recorded:
        read = reading.one(f"/v1/refunds/{recorded}", provider.refund_read(recorded))
        if read.accepted:
            carrying[recorded] = read.require()
        elif not _not_found(read):
            raise _unreadable(read)
        reading.shows["recorded_refund"] = {"id": recorded, "found": read.accepted}
    charge = reading.one(f"/v1/charges/{charge_id}", provider.charge_read(charge_id))
    if _not_found(charge):
        raise ProviderShowsNoCharge(
            f"The provider does not hold charge {charge_id}: nothing it shows about its refunds "
            "can support this correction.",
            details={"charge": charge_id},
        )
    if not charge.accepted:
        raise _unreadable(charge)
    for refund in reading.pages("/v1/refunds", provider.refund_pages_of_charge(charge_id)):
        refund_id = str(refund.get("id"))
        if refund_id == recorded or (refund.get("metadata") or {}).get("vouch_leg") == (
            leg.public_id
        ):
            carrying[refund_id] = refund
    reading.shows["refunds"] = [_summary(refund) for refund in carrying.values()]
    live = {
        rid: str(r.get("status")) for rid, r in carrying.items() if r.get("status") not in _GONE
    }
    details = {"charge": charge_id, "refunds": live}
    if "succeeded" in live.values():
        raise ProviderShowsRefundSucceeded(
            f"The provider shows a refund of this leg succeeded ({_listed(live)}): the money "
            "reached the buyer's card. It is not released.",
            details=details,
        )
    if live:
        raise ProviderShowsRefundInFlight(
            f"The provider shows a refund of this leg still in flight ({_listed(live)}): it may "
            "still succeed. Wait for it.",
            details=details,
        )


def _check_no_live_payment(funding: FundingLeg, reading: _Reading) -> None:
    """An abandon: no PaymentIntent carrying the leg — its recorded one (read by its id) or any
    with its `vouch_funding` metadata — succeeded or may still succeed."""
    provider = _provider()
    intents: dict[str, dict[str, Any]] = {}
    recorded = funding.payment_intent_id
    if recorded:
        read = reading.one(
            f"/v1/payment_intents/{recorded}", provider.payment_intent_read(recorded)
        )
        if read.accepted:
            intents[recorded] = read.require()
        elif not _not_found(read):
            raise _unreadable(read)
    found = reading.pages(
        "/v1/payment_intents/search",
        provider.payment_intent_pages_with_metadata("vouch_funding", funding.public_id),
    )
    for intent in found:
        intents[str(intent.get("id"))] = intent
    reading.shows["payment_intents"] = [_summary(intent) for intent in intents.values()]
    live = {
        pid: str(i.get("status"))
        for pid, i in intents.items()
        if i.get("status") not in _NO_PAYMENT
    }
    details = {"payment_intents": live}
    if "succeeded" in live.values():
        raise ProviderShowsPaymentSucceeded(
            f"The provider shows this funding leg's payment succeeded ({_listed(live)}): the "
            "buyer was charged. Accept the leg naming that PaymentIntent instead.",
            details=details,
        )
    if live:
        raise ProviderShowsPaymentInFlight(
            f"The provider shows a payment of this funding leg that may still succeed "
            f"({_listed(live)}).",
            details=details,
        )


def _listed(statuses: dict[str, str]) -> str:
    return ", ".join(f"{object_id} {status}" for object_id, status in statuses.items())


@dataclass(frozen=True)
class _Evidence:
    provider_object: dict[str, Any]  # the object an accept names, as the provider showed it
    amount: int  # what the correction moves, in micro-dollars
    read: ProviderRead | None  # the stored read (None: a confirmation, which reads nothing)


def _provider_evidence(
    kind: str, provider_object_id: str, subject: Subject, *, purpose: str
) -> _Evidence:
    """Read the provider for a correction and check that it supports it; the read is stored
    (with its SHA-256) whatever it shows, then the refusal, if any, is raised."""
    if kind == AdjustmentKind.CONFIRM:
        return _Evidence({}, 0, None)  # no money moves: nothing to show
    reading = _Reading()
    try:
        provider_object, amount = _read_and_check(kind, provider_object_id, subject, reading)
    except (AdjustmentProviderMismatch, AdjustmentProviderUnreadable) as exc:
        reading.shows["refused"] = exc.code
        _store(reading, kind, subject, purpose)
        raise
    return _Evidence(provider_object, amount, _store(reading, kind, subject, purpose))


def _read_and_check(
    kind: str, provider_object_id: str, subject: Subject, reading: _Reading
) -> tuple[dict[str, Any], int]:
    if kind in _NAMES_A_REFUND:
        refund = _read_refund(provider_object_id, reading)
        return refund, _check_refund(kind, refund, subject)
    if kind == AdjustmentKind.FUNDING_ACCEPT:
        funding = _need(subject.funding_leg)
        intent = _read_intent(provider_object_id, reading)
        _check_intent(intent, funding)
        return intent, funding.amount_micro
    if kind == AdjustmentKind.FUNDING_ABANDON:
        _check_no_live_payment(_need(subject.funding_leg), reading)
        return {}, 0  # no money moves: the leg was never funded money
    leg = _need(subject.refund_leg)  # leg_release, leg_reverse
    _check_no_live_refund(leg, reading)
    return {}, leg.amount_micro


def _store(reading: _Reading, kind: str, subject: Subject, purpose: str) -> ProviderRead | None:
    if not reading.answers:
        return None  # refused before anything was asked (a malformed id)
    leg: RefundLeg | FundingLeg = subject.refund_leg or _need(subject.funding_leg)
    return provider_read_store(
        purpose=purpose,
        answers=reading.answers,
        shows=reading.shows,
        envelope_id=subject.envelope.pk,
        kind=kind,
        subject=leg.public_id,
    )


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


# --- deciding ---------------------------------------------------------------------------------


def adjustment_approve(
    *, adjustment: Adjustment, actor: User, confirmed_amount_micro: Any, note: str = ""
) -> Adjustment:
    """A second person, with `reconciliation.approve_adjustment`, approves the correction after
    confirming its amount; the one `adjust` journal entry is written under the envelope's lock
    and the escalation it answers is resolved as `adjusted`. The provider is read again first
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
        locked.status = AdjustmentStatus.APPLIED
        locked.decided_by = actor
        locked.decided_at = timezone.now()
        locked.decision_note = note.strip()
        if evidence.provider_object:
            locked.provider_object = evidence.provider_object
        locked.approval_read = evidence.read
        locked.save()
        if locked.escalation is not None and locked.escalation.status == EscalationStatus.OPEN:
            said = (
                f"Adjusted by {locked.public_id} ({locked.kind}, {locked.amount_micro:,} micro), "
                f"proposed by {locked.proposed_by}: {locked.reason}"
            )
            if locked.decision_note:
                said = f"{said} Approved: {locked.decision_note}"
            escalation_resolve(
                escalation=locked.escalation, actor=actor, note=said, adjustment=locked.public_id
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
