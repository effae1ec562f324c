"""What the API (and the MCP tools) show of envelopes and refunds: the caller's own rows, their
figures (with the money a dispute holds or took, SPEC §18), and a refund's preview."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import QuerySet

from core import db
from core.display import dollars
from core.exceptions import NotFound
from envelopes.exceptions import AmountExceedsUnspent, NothingToRefund
from envelopes.models import (
    BALANCES,
    Debit,
    DisputeFunds,
    Envelope,
    FundingLeg,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.money import with_usd
from envelopes.selectors.refund_references import refund_reference_data

# The allocation rule is one function, shared with the refund that reserves it (a pure function:
# no write happens through this import).
from envelopes.services.allocation import refund_allocate
from verification.models import Verdict

if TYPE_CHECKING:
    from accounts.models import User


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


# --- the money a dispute holds or took, in words (SPEC §18) ---------------------------------------


def held_words(held_micro: int) -> str:
    """Why money is held, for the buyer: "$20.00 held: your bank is reviewing a dispute on this
    payment"."""
    return f"{dollars(held_micro)} held: your bank is reviewing a dispute on this payment"


def charged_back_words(charged_back_micro: int) -> str:
    """Where charged-back money went, for the buyer (final)."""
    return (
        f"{dollars(charged_back_micro)} charged back: your bank returned it to you after a dispute"
    )


HELD_NOT_REFUNDABLE = (
    "Held money cannot be refunded: Stripe took it from the envelope when the dispute opened. If "
    "the dispute is decided for the seller it comes back to the envelope; if not, your bank has "
    "returned it to you."
)


def held_note(envelope: Envelope) -> str | None:
    """Why part of the envelope cannot be refunded now (None when nothing is held)."""
    if envelope.held_micro <= 0:
        return None
    return f"{held_words(envelope.held_micro)}. {HELD_NOT_REFUNDABLE}"


def _dispute_funds(funds: DisputeFunds) -> dict[str, Any]:
    """One dispute's money, as its buyer may see it: what is held or charged back and why. The
    exposure (what the charge no longer had) is the platform's, for staff only."""
    return {
        "dispute": funds.provider_dispute_id,
        "charge": funds.charge_id,
        "status": funds.status,
        "held_micro": funds.held_micro,
        "charged_back_micro": funds.charged_back_micro,
        "updated_at": funds.updated_at.isoformat(),
    }


def _funding(leg: FundingLeg) -> dict[str, Any]:
    return {
        "funding_id": leg.public_id,
        "kind": leg.kind,
        "sequence": leg.sequence,
        "status": leg.status,
        "amount_micro": leg.amount_micro,
        "refunded_micro": leg.refunded_micro,
        "reserved_micro": leg.reserved_micro,
        "held_micro": leg.held_micro,
        "charged_back_micro": leg.charged_back_micro,
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
        legs, debits, refunds, refund_legs, funds = _detail_rows(envelope)
        legs_of: dict[int, list[RefundLeg]] = {}
        for leg in refund_legs:
            legs_of.setdefault(leg.operation_id, []).append(leg)
        data["funding_legs"] = [_funding(leg) for leg in legs]
        data["debits"] = [_debit(d) for d in debits]
        data["refunds"] = [refund_summary(op, legs=legs_of.get(op.pk, [])) for op in refunds]
        data["disputes"] = [_dispute_funds(f) for f in funds]
    return with_usd(data)


def _detail_rows(envelope: Envelope) -> tuple[list[Any], ...]:
    """An envelope's funding legs, debits, refunds (newest first), their legs and its disputes'
    funds, in one round trip of plain SQL (core.db): five ORM queries spent half of a read's CPU
    building their SQL (issue 39 item 11, bench/mcp_vs_rest.py --profile). Same rows, same order."""
    pk = [envelope.pk]
    operations = connection.ops.quote_name(RefundOperation._meta.db_table)
    statements = [
        db.select(FundingLeg, "envelope_id = %s", pk, order_by='"sequence"'),
        db.select(Debit, "envelope_id = %s", pk, order_by="created_at, id"),
        db.select(RefundOperation, "envelope_id = %s", pk, order_by="created_at DESC, id DESC"),
        db.select(
            RefundLeg,
            f"operation_id IN (SELECT id FROM {operations} WHERE envelope_id = %s)",  # noqa: S608
            pk,
            order_by="id",
        ),
        db.select(DisputeFunds, "envelope_id = %s", pk, order_by="created_at, id"),
    ]
    models = (FundingLeg, Debit, RefundOperation, RefundLeg, DisputeFunds)
    return tuple(
        db.instances(model, rows)
        for model, rows in zip(models, db.execute(statements), strict=True)
    )


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
        "queued": leg.deferred_at is not None,
        "bank_reference": refund_reference_data(leg),
    }


def failed_later(leg: RefundLeg) -> bool:
    """Stripe accepted the leg, then reported it failed or canceled: its money is back in the
    envelope (SPEC §3, "Later failure")."""
    return leg.outcome == LegOutcome.ACCEPTED and leg.released


def refund_status(legs: list[RefundLeg]) -> str:
    """What the provider last said of every leg: a void leg (never made, released by an approved
    correction) and a leg accepted then failed later (released) count as refused — their money is
    back."""
    outcomes = {
        LegOutcome.REFUSED if leg.outcome == LegOutcome.VOID or failed_later(leg) else leg.outcome
        for leg in legs
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
    when no leg was accepted (nothing reached the provider to be proven). A leg Stripe accepted
    and later failed is never verified, whatever its readback said before: attention (its verdict
    stays as recorded; `released` shows the money is back)."""
    accepted = [leg for leg in legs if leg.outcome == LegOutcome.ACCEPTED]
    verdicts = [
        leg.verification_run.verdict if leg.verification_run else Verdict.PENDING
        for leg in accepted
    ]
    if (
        any(leg.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN) for leg in legs)
        or Verdict.PENDING in verdicts
    ):
        return "pending"
    if not accepted:
        return "not_applicable"
    if any(failed_later(leg) for leg in accepted):
        return "attention"
    return "verified" if all(v == Verdict.VERIFIED for v in verdicts) else "attention"


def refund_summary(
    operation: RefundOperation, *, legs: list[RefundLeg] | None = None
) -> dict[str, Any]:
    """A refund in an envelope's list; `legs`: its legs when the caller read them already."""
    legs = list(operation.legs.all()) if legs is None else legs
    return {
        "refund_id": operation.public_id,
        "status": refund_status(legs),
        "requested_micro": operation.requested_micro,
    }


def refund_data(operation: RefundOperation) -> dict[str, Any]:
    """The refund resource. Right after `envelope_refund` the legs are the ones it recorded (in
    memory), and the balances those its last record read back (or read now, if that record moved
    no money); otherwise everything is read in one query."""
    if operation.recorded_legs is not None:
        legs = sorted(operation.recorded_legs, key=lambda leg: leg.sequence)
        envelope = operation.recorded_envelope  # as the last record left it
        if envelope is None:  # plain SQL (core.db): the ORM spent more CPU building it than PG
            rows = db.execute([db.select(Envelope, "id = %s", [operation.envelope_id])])[0]
            envelope = db.instances(Envelope, rows)[0]
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


def refund_preview(*, envelope: Envelope, amount_micro: int | None) -> dict[str, Any]:
    """The refund `envelope_refund` would make now (SPEC §3): the same last-in-first-out
    allocation, each leg rounded down to a cent, read without locks and reserving nothing: what a
    person is shown before confirming (SPEC §16). `amount_micro` None: the whole unspent balance.
    Refuses as the refund would: `amount_exceeds_unspent`, `nothing_to_refund` — when a dispute
    holds money, the refusal says so (`held_micro` in its details). Pass an envelope read just
    now: the preview is of the figures it holds. `held_note` says why held money is not part of
    it (SPEC §18)."""
    try:
        allocation = refund_allocate(envelope, amount_micro)
    except (AmountExceedsUnspent, NothingToRefund) as exc:
        note = held_note(envelope)
        if note is None:
            raise
        # The refusal's own words (the allocation's held sentence replaced by the note, never
        # both), with the refund's details.
        raise type(exc)(
            f"{type(exc).default_message} {note}",
            details={**exc.details, "held_micro": envelope.held_micro},
        ) from exc
    return with_usd(
        {
            "requested_micro": allocation.requested,
            "legs": [
                {
                    "funding_id": leg.public_id,
                    "kind": leg.kind,
                    "sequence": leg.sequence,
                    "charge": leg.charge_id or None,
                    "amount_micro": amount,
                }
                for leg, amount in allocation.legs
            ],
            "total_micro": allocation.total,
            "remainder_micro": allocation.requested - allocation.total,
            "unspent_micro": envelope.unspent_micro,
            "held_micro": envelope.held_micro,
            "held_note": held_note(envelope),
        }
    )
