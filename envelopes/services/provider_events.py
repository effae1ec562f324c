"""The provider's events about payments and refunded charges: each re-reads the provider (events
may be stale, out of order or forged) and records what it shows through the funding and release
services, never on the event's word."""

from __future__ import annotations

import contextlib
from typing import Any, TypeGuard

from core.services import audit_record
from envelopes.models import MICRO_PER_CENT, FundingLeg, FundingStatus, RefundLeg
from envelopes.services.funding import FUNDING_REFUSALS, funding_record, intent_is_the_legs
from envelopes.services.journal import _provider
from envelopes.services.releases import foreign_refund_release, refund_leg_release


def funding_on_provider_event(*, event: dict[str, Any]) -> None:
    """`payment_intent.succeeded` / `payment_intent.payment_failed`: a pending leg settles without
    waiting for the job. The PaymentIntent is read again (events may be stale or out of order)
    and recorded as the request would have; a PaymentIntent Vouch did not make changes nothing."""
    obj = (event.get("data") or {}).get("object") or {}
    if not isinstance(obj, dict) or obj.get("object") != "payment_intent":
        return
    intent_id, funding_id = obj.get("id"), (obj.get("metadata") or {}).get("vouch_funding")
    if not (_an_id(intent_id) and _an_id(funding_id)):
        return  # not one of Vouch's PaymentIntents, or no event of Stripe's
    leg = FundingLeg.objects.select_related("envelope").filter(public_id=funding_id).first()
    if leg is None or leg.status != FundingStatus.PENDING:
        return
    read = _provider().payment_intent_read(intent_id)
    if not read.accepted:
        if read.refused:
            return  # no such PaymentIntent: the event lied or was forged; the job looks later
        raise RuntimeError(
            f"PaymentIntent {intent_id} could not be read: {read.error_code} ({read.error_message})"
        )
    if not intent_is_the_legs(leg, read.require()):
        return
    with contextlib.suppress(*FUNDING_REFUSALS):
        funding_record(leg=leg, outcome=read)


def charge_on_refunded_event(*, event: dict[str, Any]) -> None:
    """`charge.refunded`: read the charge again (events may be stale) and list its refunds, every
    page (Stripe includes `charge.refunds` only when expanded since API 2022-11-15, and an
    expanded list holds ten), and compare what the provider has refunded on it with what Vouch's
    refund legs hold. An event that shows no more refunded than Vouch counts (the event of each
    refund Vouch makes) reads nothing (`refund_event_needs_no_read`; issue 40: a read and a list
    of up to a hundred refunds for every refund, at Stripe's 25 a second, held a busy hour's
    verdicts back for many minutes); a refund that fails or is canceled later comes as its own
    `refund.failed` / `refund.updated` event (`refund_leg_on_provider_event`, which reads it).
    Otherwise a refund Vouch has not seen go back (failed or canceled) is released through the
    one release service; more refunded at the provider than Vouch holds or has in flight is a
    refund made elsewhere (the Dashboard): recorded as an audit event — no money moves by itself
    (a person, or reconciliation, acts). Reconciliation, which stands above envelopes, handles
    the same event itself (reconciliation.events): it opens the `refund_foreign` discrepancy at
    once, and the buyer's pages say the money is under review while it is open
    (envelopes.selectors.buyer.money_under_review)."""
    obj = (event.get("data") or {}).get("object") or {}
    charge_id = obj.get("id") if isinstance(obj, dict) else None
    if not _an_id(charge_id):
        return
    funding = FundingLeg.objects.filter(charge_id=charge_id).first()
    if funding is None or refund_event_needs_no_read(event, funding):
        return  # nothing beyond Vouch's count: no read (issue 40; see the docstring)
    read = _provider().charge_read(charge_id)
    if not read.accepted:
        if read.refused:
            return
        raise RuntimeError(
            f"charge {charge_id} could not be read: {read.error_code} ({read.error_message})"
        )
    charge = read.require()
    listed = _provider().refunds_of_charge(charge_id)
    if not listed.accepted:
        raise RuntimeError(
            f"the refunds of charge {charge_id} could not be listed: {listed.error_code} "
            f"({listed.error_message})"
        )
    for refund in listed.require()["data"]:
        if refund.get("status") in ("failed", "canceled"):
            leg = RefundLeg.objects.filter(provider_refund_id=str(refund.get("id"))).first()
            if leg is not None:
                refund_leg_release(
                    leg=leg, reason=f"provider reports {refund['status']}", provider_refund=refund
                )
            else:  # a refund made outside Vouch, recorded by an adjustment
                foreign_refund_release(
                    provider_refund=refund, source=f"charge.refunded {event.get('id')}"
                )
    funding.refresh_from_db()
    provider_micro = int(charge.get("amount_refunded") or 0) * MICRO_PER_CENT
    if provider_micro > funding.refunded_micro + funding.reserved_micro:
        audit_record(
            actor=None,
            action="charge.refunded_elsewhere",
            target_type="funding_leg",
            target_id=funding.public_id,
            details={
                "charge": charge_id,
                "provider_amount_refunded": charge.get("amount_refunded"),
                "vouch_refunded_micro": funding.refunded_micro,
                "vouch_reserved_micro": funding.reserved_micro,
                "event": event.get("id"),
            },
        )


def refund_event_needs_no_read(event: dict[str, Any], funding: FundingLeg) -> bool:
    """Whether a refund event of this funding charge shows, by itself, nothing Vouch does not
    already count, so that it costs no read of the provider (issue 40: at Stripe's 25 reads a
    second, the reads of its own refunds' events tripled a busy hour's): `refund.created` of a
    refund naming one of Vouch's legs on this charge, for that leg's amount; `charge.refunded`
    whose `amount_refunded` is within what Vouch counts refunded or in flight on the charge. Any
    other event is read again from the provider (events may be stale, out of order or forged).
    Nothing is believed from the event: it only spares a read that could find nothing new — a
    refund made elsewhere raises the charge's refunded amount in its own events, and a refund
    that fails later comes as `refund.failed` / `refund.updated`, read on their own."""
    obj = (event.get("data") or {}).get("object") or {}
    if not isinstance(obj, dict):
        return False
    if obj.get("object") == "refund":
        leg_id, amount = (obj.get("metadata") or {}).get("vouch_leg"), obj.get("amount")
        if not _an_id(leg_id) or not _cents(amount):
            return False
        leg = RefundLeg.objects.filter(public_id=leg_id, funding_leg=funding).first()
        return leg is not None and leg.amount_micro == amount * MICRO_PER_CENT
    if obj.get("object") == "charge":
        refunded = obj.get("amount_refunded")
        counted = funding.refunded_micro + funding.reserved_micro
        return _cents(refunded) and refunded * MICRO_PER_CENT <= counted
    return False


def _cents(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _an_id(value: Any) -> TypeGuard[str]:
    """A provider object's id as an event names it: a non-empty string."""
    return isinstance(value, str) and bool(value)
