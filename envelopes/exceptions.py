from typing import Any, ClassVar

from core.exceptions import VouchError


class InvalidAmount(VouchError):
    code = "invalid_amount"
    status_code = 400
    default_message = "The amount is not valid."


class UnsupportedCurrency(VouchError):
    code = "unsupported_currency"
    status_code = 400
    default_message = "Only USD is supported."


class AmountExceedsUnspent(VouchError):
    code = "amount_exceeds_unspent"
    status_code = 422
    default_message = "The amount is larger than the envelope's unspent balance."


class NothingToRefund(VouchError):
    code = "nothing_to_refund"
    status_code = 409
    default_message = "Nothing can be refunded: no unspent money, or every leg rounds to zero."


class RefundChanged(VouchError):
    """The refund the caller confirmed (its amount and legs) is not the one the envelope allows
    now: a debit or another refund landed in between. Nothing was reserved."""

    code = "refund_changed"
    status_code = 409
    default_message = "The envelope changed since this refund was shown; nothing was refunded."


class CardDeclined(VouchError):
    """The provider refused the card (Stripe's card errors keep their own code). The provider was
    called, so the answer is stored under the idempotency key."""

    code = "card_declined"
    status_code = 402
    default_message = "The card was declined."
    stores_idempotent_response: ClassVar[bool] = True

    def __init__(self, code: str, message: str | None = None, *, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.code = code  # type: ignore[misc]


class InvalidPaymentMethod(VouchError):
    code = "invalid_payment_method"
    status_code = 400
    default_message = "The payment provider does not know this payment method."
    stores_idempotent_response: ClassVar[bool] = True


class PaymentRefused(VouchError):
    """The provider definitely refused the payment for a reason that is not the card's."""

    code = "payment_refused"
    status_code = 422
    default_message = "The payment provider refused the payment."
    stores_idempotent_response: ClassVar[bool] = True


class ProviderUnavailable(VouchError):
    code = "provider_unavailable"
    status_code = 502
    default_message = "The payment provider could not be reached; nothing was attempted."


# --- adjustments (SPEC §15.4) --------------------------------------------------------------------


class AdjustmentNotApplicable(VouchError):
    """The correction does not fit what the ledger holds now (the leg moved on, the escalation is
    resolved, the envelope's unspent money cannot absorb it)."""

    code = "adjustment_not_applicable"
    status_code = 409
    default_message = "This adjustment does not apply to the ledger as it stands."


class AdjustmentProviderMismatch(VouchError):
    """What the provider shows does not support the correction (no such object, another charge,
    another amount, a failed or canceled refund, an object recorded already)."""

    code = "adjustment_provider_mismatch"
    status_code = 422
    default_message = "The provider's object does not match this correction."


class AdjustmentProviderUnreadable(VouchError):
    code = "adjustment_provider_unreadable"
    status_code = 502
    default_message = "The provider could not be read; nothing was changed. Try again."


class AdjustmentSelfApproval(VouchError):
    code = "adjustment_self_approval"
    status_code = 403
    default_message = (
        "An adjustment is approved by a second person, not by the one who proposed it."
    )


class AdjustmentAmountMismatch(VouchError):
    code = "adjustment_amount_mismatch"
    status_code = 422
    default_message = "The amount confirmed is not the adjustment's amount: look at it again."


class AdjustmentAlreadyDecided(VouchError):
    code = "adjustment_already_decided"
    status_code = 409
    default_message = "This adjustment was approved or rejected already."
