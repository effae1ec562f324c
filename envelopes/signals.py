"""What other apps can listen to, so that envelopes never imports them. Each signal is sent
inside the transaction of the change it announces: a listener's writes commit or roll back with
it, and a listener never calls the provider."""

from django.dispatch import Signal

# A refund leg's money went back to unspent (a FAILED verdict, a cancel, a later refund.failed).
# sender=RefundLeg, leg=<the released leg>, reason=<str>, provider_refund=<the provider's Refund
# object as just read back, or None when the release did not read it>.
refund_leg_released = Signal()

# An adjustment was approved and written to the journal (inside that transaction).
# sender=Adjustment, adjustment=<the applied adjustment>.
adjustment_applied = Signal()

# A refund leg's reference at the card network (its ARN) was first recorded available (inside that
# transaction). sender=RefundLeg, leg=<the leg, with refund_reference* set>.
refund_leg_reference_known = Signal()
