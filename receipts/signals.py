"""What other apps can listen to, so that receipts never imports them."""

from django.dispatch import Signal

# A receipt was written (not found already written). Sent inside the transaction that writes it:
# a listener that does real work defers it with `transaction.on_commit`.
# sender=Receipt, receipt=<the new receipt>.
receipt_written = Signal()
