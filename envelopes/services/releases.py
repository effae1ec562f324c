"""Releases: the one service that gives a refund leg's money back (SPEC §2), the release of a
recorded foreign refund the provider shows failed or canceled (SPEC §15.4), and the verdicts and
provider events that lead to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.services import audit_record
from envelopes.locks import lock_envelope, lock_leg
from envelopes.models import (
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    FundingLeg,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.provider_reads import Answer, provider_read_store
from envelopes.services.journal import _funding_move, _move, _provider
from envelopes.signals import refund_leg_released
from verification.models import Verdict, VerificationRun

_GONE = ("failed", "canceled")  # a refund that gave nothing back


def _foreign_recorded(refund_id: str) -> bool:
    """Whether an applied `foreign_refund` adjustment records this refund and it is not released."""
    return Adjustment.objects.filter(
        kind=AdjustmentKind.FOREIGN_REFUND,
        status=AdjustmentStatus.APPLIED,
        provider_object_id=refund_id,
        released_at__isnull=True,
    ).exists()


def refund_leg_release(
    *, leg: RefundLeg, reason: str, provider_refund: dict[str, Any] | None = None
) -> bool:
    """The one release service (SPEC §2): give a leg's money back to unspent, once. A refused
    leg (reserved -> unspent), a FAILED verdict, a cancel, a later refund.failed, a
    `charge.refunded` that shows it failed (refunded -> unspent) all come through here, as
    reconciliation will. The unique release entry per leg makes a second caller a no-op. Returns
    whether this call released it. `refund_leg_released` is sent in the same transaction, with
    `provider_refund` (the provider's Refund as read back) when known."""
    with transaction.atomic():
        envelope = lock_envelope(leg.operation.envelope_id)
        fresh = lock_leg(leg.pk)
        if fresh.released:
            return False
        amount = fresh.amount_micro
        if fresh.outcome == LegOutcome.ACCEPTED:  # the provider made it, then it failed
            _funding_move(fresh.funding_leg_id, refunded=-amount)
            deltas = {"refunded": -amount}
        elif fresh.outcome == LegOutcome.REFUSED:  # the provider definitely never made it
            _funding_move(fresh.funding_leg_id, reserved=-amount)
            deltas = {"reserved": -amount}
        else:  # reserved or unknown: never released on a guess
            return False
        fresh.released = True
        fresh.save(update_fields=["released"])
        _move(
            envelope,
            JournalEntry.Kind.RELEASE,
            unspent=amount,
            refund_leg=fresh,
            note=reason[:200],
            **deltas,
        )
        refund_leg_released.send(
            sender=RefundLeg, leg=fresh, reason=reason, provider_refund=provider_refund
        )
    return True


def refund_leg_on_verdict(*, run: VerificationRun) -> None:
    """A refund leg's verification decided: FAILED or the `reversed` contradiction (canceled) gives
    the money back; other bad verdicts move no money (a person resolves them)."""
    if run.verdict == Verdict.FAILED or (
        run.verdict == Verdict.CONTRADICTED and run.verdict_class == "reversed"
    ):
        leg = RefundLeg.objects.filter(verification_run=run).first()
        if leg is not None:
            refund_leg_release(leg=leg, reason=f"verification {run.verdict}: {run.verdict_reason}")


def foreign_refund_release(*, provider_refund: Mapping[str, Any], source: str) -> bool:
    """The one automatic correction for a refund made outside Vouch (SPEC §15.4): a refund an
    applied `foreign_refund` adjustment recorded (unspent -> refunded) that the provider shows
    `failed` or `canceled` gives its amount back — refunded -> unspent, and the funding leg's
    refunded amount — once: one release entry per adjustment (a database constraint), written
    under the envelope's lock, so that the webhook, `charge.refunded` and reconciliation noticing
    it together release it once. `provider_refund` is the provider's Refund as the caller read or
    listed it (`source` says who: it goes on the entry's note); it is stored with its SHA-256
    and cited on the release entry. Never calls the provider. Returns whether this call released
    it (False: not failed or canceled, recorded by no applied adjustment, on another charge, or
    released already)."""
    refund_id = str(provider_refund.get("id") or "")
    status = provider_refund.get("status")
    if not refund_id or status not in _GONE:
        return False
    adjustment = (
        Adjustment.objects.select_related("refund_leg")
        .filter(
            kind=AdjustmentKind.FOREIGN_REFUND,
            status=AdjustmentStatus.APPLIED,
            provider_object_id=refund_id,
            released_at__isnull=True,
        )
        .first()
    )
    if adjustment is None:
        return False
    funding_id = adjustment.funding_leg_id or (
        adjustment.refund_leg.funding_leg_id if adjustment.refund_leg is not None else None
    )
    funding = FundingLeg.objects.filter(pk=funding_id).first() if funding_id else None
    charge = provider_refund.get("charge")
    charge_id = str((charge.get("id") if isinstance(charge, Mapping) else charge) or "")
    if funding is None or charge_id != funding.charge_id:
        return False  # not the refund recorded on that charge
    try:
        with transaction.atomic():
            envelope = lock_envelope(adjustment.envelope_id)
            locked = Adjustment.objects.select_for_update(of=("self",)).get(pk=adjustment.pk)
            if locked.released_at is not None or locked.status != AdjustmentStatus.APPLIED:
                return False
            amount = locked.amount_micro
            read = provider_read_store(
                purpose="refund.release",
                kind=locked.kind,
                subject=refund_id,
                envelope_id=envelope.pk,
                answers=[
                    Answer.given(
                        {"path": f"/v1/refunds/{refund_id}", "source": source}, provider_refund
                    )
                ],
                shows={"refund": refund_id, "status": status},
            )
            _funding_move(funding.pk, refunded=-amount)
            _move(
                envelope,
                JournalEntry.Kind.RELEASE,
                refunded=-amount,
                unspent=amount,
                funding_leg=funding,
                adjustment=locked,
                provider_read=read,
                note=f"foreign refund {refund_id} {status} ({source})"[:200],
            )
            locked.released_at = timezone.now()
            locked.save(update_fields=["released_at"])
            audit_record(
                actor=None,
                action="adjustment.release",
                target_type="envelope",
                target_id=envelope.public_id,
                details={
                    "adjustment": locked.public_id,
                    "provider_refund": refund_id,
                    "status": status,
                    "amount_micro": amount,
                    "source": source,
                    "provider_read": read.public_id,
                },
            )
    except IntegrityError:  # released meanwhile (the one release entry per adjustment)
        return False
    return True


def refund_leg_on_provider_event(*, event: dict[str, Any]) -> None:
    """A `refund.failed`/`refund.updated` event: re-read the refund (events may be stale or out of
    order) and release the leg — or the recorded foreign refund — if the provider now shows it
    failed or canceled."""
    obj = (event.get("data") or {}).get("object") or {}
    refund_id = str(obj.get("id", "")) if isinstance(obj, dict) else ""
    leg = RefundLeg.objects.filter(provider_refund_id=refund_id).first() if refund_id else None
    if leg is None:
        if refund_id and _foreign_recorded(refund_id):
            foreign = _provider().refund_read(refund_id)
            if foreign.accepted:
                foreign_refund_release(
                    provider_refund=foreign.require(),
                    source=f"webhook {event.get('type')} {event.get('id')}",
                )
        return
    read = _provider().refund_read(leg.provider_refund_id)
    if read.accepted and read.require().get("status") in ("failed", "canceled"):
        refund = read.require()
        refund_leg_release(
            leg=leg, reason=f"provider reports {refund['status']}", provider_refund=refund
        )
