"""Debits: unspent money committed to delivered work, never refundable afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from core.crash import crash_point
from core.idempotency import idempotency_attach
from core.services import audit_record
from envelopes.exceptions import (
    AmountExceedsUnspent,
    InvalidAmount,
)
from envelopes.locks import lock_envelope
from envelopes.models import (
    Debit,
    Envelope,
    JournalEntry,
)
from envelopes.services.journal import _move

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord


def debit_add(
    *,
    envelope: Envelope,
    amount_micro: Any,
    reference: str,
    actor: User,
    idempotency: IdempotencyRecord | None = None,
) -> Debit:
    """Commit unspent money to delivered work. Never refundable afterwards. The debit is attached
    to the request's idempotency record in the transaction that makes it: a resumed request
    returns that debit and never debits again."""
    if idempotency is not None and idempotency.resource:  # a resumed request: it debited already
        return Debit.objects.get(public_id=idempotency.resource, envelope=envelope)
    if not isinstance(amount_micro, int) or isinstance(amount_micro, bool) or amount_micro <= 0:
        raise InvalidAmount("amount_micro must be a positive integer number of micro-dollars.")
    with transaction.atomic():
        locked = lock_envelope(envelope.pk)
        if amount_micro > locked.unspent_micro:
            raise AmountExceedsUnspent(
                details={"unspent_micro": locked.unspent_micro, "amount_micro": amount_micro}
            )
        debit = Debit.objects.create(
            envelope=locked, amount_micro=amount_micro, reference=reference, created_by=actor
        )
        _move(
            locked,
            JournalEntry.Kind.DEBIT,
            debited=amount_micro,
            unspent=-amount_micro,
            debit=debit,
        )
        idempotency_attach(idempotency, debit.public_id)
        audit_record(
            actor=actor,
            action="envelope.debit",
            target_type="envelope",
            target_id=locked.public_id,
            details={
                "debit": debit.public_id,
                "amount_micro": amount_micro,
                "reference": reference,
            },
        )
    crash_point("debit_after_commit")
    return debit
