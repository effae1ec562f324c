"""Row locks, always taken in the same order: envelope, then refund operation, then leg."""

from typing import Any

from django.db import connection

from accounts.models import User
from core import db
from core.exceptions import NotFound
from envelopes.models import Envelope, FundingLeg, FundingStatus, RefundLeg, RefundOperation


def lock_envelope(envelope_id: int) -> Envelope:
    return Envelope.objects.select_for_update(of=("self",)).get(pk=envelope_id)


def lock_owned_envelope(*, public_id: str, owner: User) -> Envelope:
    """The owner's envelope, locked; another buyer's answers exactly as a missing one."""
    envelope = (
        Envelope.objects.select_for_update(of=("self",))
        .filter(public_id=public_id, owner=owner)
        .first()
    )
    if envelope is None:
        raise NotFound()
    return envelope


def lock_envelope_with_funding(
    *,
    envelope_id: int | None = None,
    public_id: str = "",
    owner: User | None = None,
    within: db.Transaction | None = None,
) -> tuple[Envelope, list[FundingLeg]]:
    """An envelope locked (by id, or by public id and owner: another buyer's answers exactly as a
    missing one) and its succeeded funding legs, oldest first: what a refund allocates from. One
    round trip on PostgreSQL (core.db.execute): the legs are read after the lock, in the same
    transaction, as the ORM's two queries would. Two statements, not one join: a statement that
    waited for the lock sees the envelope as its holder left it but joined rows as they were when
    it began, and would allocate from legs a refund just reserved (READ COMMITTED: each statement
    has a snapshot of its own). `within`: the transaction it opens (core.db.Transaction), else the
    caller's."""
    params: list[Any]
    if envelope_id is not None:
        where, params = "id = %s", [envelope_id]
    else:
        if owner is None:
            raise TypeError("an envelope by public id needs its owner")
        where, params = "public_id = %s AND owner_id = %s", [public_id, owner.pk]
    table = connection.ops.quote_name(Envelope._meta.db_table)
    envelope_rows, leg_rows = (within.execute if within is not None else db.execute)(
        [
            db.select(Envelope, where, params, lock=True),
            db.select(
                FundingLeg,
                f"envelope_id = (SELECT id FROM {table} WHERE {where}) AND status = %s",  # noqa: S608
                [*params, FundingStatus.SUCCEEDED.value],
                order_by="sequence",
            ),
        ]
    )
    if not envelope_rows:
        raise NotFound()
    return db.instances(Envelope, envelope_rows)[0], db.instances(FundingLeg, leg_rows)


def lock_operation(operation_id: int) -> RefundOperation:
    return RefundOperation.objects.select_for_update(of=("self",)).get(pk=operation_id)


def lock_leg(leg_id: int) -> RefundLeg:
    return RefundLeg.objects.select_for_update(of=("self",)).get(pk=leg_id)
