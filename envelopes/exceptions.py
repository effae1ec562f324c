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
    """What the provider shows does not support the correction: `adjustment_provider_mismatch`
    when the object an accept names is not there, is on another charge, is for another amount,
    names another leg, or gave nothing back (a failed or canceled refund, a PaymentIntent that did
    not succeed). The subclasses below say more precisely what the provider shows; each is still
    an `AdjustmentProviderMismatch`."""

    code = "adjustment_provider_mismatch"
    status_code = 422
    default_message = "The provider's object does not match this correction."


class ProviderShowsRefundSucceeded(AdjustmentProviderMismatch):
    """`provider_shows_refund_succeeded`: a release or reverse of a refund leg, while the provider
    shows a refund that carries the leg (its recorded refund, or one with its `vouch_leg`
    metadata) `succeeded`: the money reached the buyer's card; giving it back to the envelope
    would count it twice."""

    code = "provider_shows_refund_succeeded"
    default_message = "The provider shows this leg's refund succeeded: the money went back."


class ProviderShowsRefundInFlight(AdjustmentProviderMismatch):
    """`provider_shows_refund_in_flight`: a release or reverse, while a refund carrying the leg is
    `pending` or `requires_action` at the provider: it may still succeed. Wait until it is
    `succeeded` (then it stands), or `failed`/`canceled` (then it is released by itself)."""

    code = "provider_shows_refund_in_flight"
    default_message = "The provider shows this leg's refund still in flight: it may succeed."


class ProviderShowsPaymentSucceeded(AdjustmentProviderMismatch):
    """`provider_shows_payment_succeeded`: an abandon of a funding leg, while the provider shows a
    PaymentIntent carrying the leg (its recorded one, or one with its `vouch_funding` metadata)
    `succeeded`: the buyer was charged. Accept the leg naming that PaymentIntent instead."""

    code = "provider_shows_payment_succeeded"
    default_message = "The provider shows this funding leg's payment succeeded: it was charged."


class ProviderShowsPaymentInFlight(AdjustmentProviderMismatch):
    """`provider_shows_payment_in_flight`: an abandon, while a PaymentIntent carrying the leg may
    still take the buyer's money (`processing`, `requires_capture`, `requires_action`,
    `requires_confirmation`)."""

    code = "provider_shows_payment_in_flight"
    default_message = "The provider shows this funding leg's payment may still succeed."


class ProviderShowsNoCharge(AdjustmentProviderMismatch):
    """`provider_shows_no_charge`: a release or reverse of a leg whose funding charge the provider
    does not hold: what it shows about the charge's refunds proves nothing (another account or
    mode?), so nothing is corrected on it."""

    code = "provider_shows_no_charge"
    default_message = "The provider does not hold this leg's charge: nothing can be shown."


class ProviderObjectAlreadyRecorded(AdjustmentProviderMismatch):
    """`provider_object_already_recorded`: an accept (or a foreign refund) naming a provider
    object — a refund, a PaymentIntent or its charge — that Vouch records on another leg already:
    one payment or refund is never counted twice."""

    code = "provider_object_already_recorded"
    default_message = "Vouch records this provider object on another leg already."


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
