"""Receipt errors. Not API errors: receipts are written by services and read by other apps."""

from django.core.exceptions import ImproperlyConfigured


class ReceiptImmutable(Exception):
    """A receipt is written once: it is never updated or deleted."""


class ReceiptKeyMissing(ImproperlyConfigured):
    """No receipt signing key is configured (RECEIPT_SIGNING_KEY): receipts cannot be written."""


class ReceiptKeyInvalid(ImproperlyConfigured):
    """A configured receipt key (signing or trusted) cannot be read."""


class ReceiptNotWritable(Exception):
    """The receipt's prerequisites do not hold (a run not VERIFIED, no readback, no parent)."""
