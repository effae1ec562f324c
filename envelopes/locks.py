"""Row locks, always taken in the same order: envelope, then refund operation, then leg."""

from envelopes.models import Envelope, RefundLeg, RefundOperation


def lock_envelope(envelope_id: int) -> Envelope:
    return Envelope.objects.select_for_update(of=("self",)).get(pk=envelope_id)


def lock_operation(operation_id: int) -> RefundOperation:
    return RefundOperation.objects.select_for_update(of=("self",)).get(pk=operation_id)


def lock_leg(leg_id: int) -> RefundLeg:
    return RefundLeg.objects.select_for_update(of=("self",)).get(pk=leg_id)
