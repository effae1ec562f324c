"""Row locks, always taken in the same order: envelope, then refund operation, then leg."""

from accounts.models import User
from envelopes.models import Envelope, RefundLeg, RefundOperation


def lock_envelope(envelope_id: int) -> Envelope:
    return Envelope.objects.select_for_update(of=("self",)).get(pk=envelope_id)


def lock_owned_envelope(*, public_id: str, owner: User) -> Envelope:
    """The owner's envelope, locked; another buyer's answers exactly as a missing one."""
    from core.exceptions import NotFound

    envelope = (
        Envelope.objects.select_for_update(of=("self",))
        .filter(public_id=public_id, owner=owner)
        .first()
    )
    if envelope is None:
        raise NotFound()
    return envelope


def lock_operation(operation_id: int) -> RefundOperation:
    return RefundOperation.objects.select_for_update(of=("self",)).get(pk=operation_id)


def lock_leg(leg_id: int) -> RefundLeg:
    return RefundLeg.objects.select_for_update(of=("self",)).get(pk=leg_id)
