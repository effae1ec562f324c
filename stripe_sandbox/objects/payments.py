"""PaymentIntents, charges and refunds as Stripe shows them, and Stripe's test cards."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from stripe_sandbox.ids import new_id


@dataclass(frozen=True)
class TestCard:
    brand: str
    last4: str
    funding: str = "credit"
    # A declined card: Stripe's error `code` and `decline_code`, and its message.
    error_code: str | None = None
    decline_code: str | None = None
    message: str | None = None
    # Stripe's pm_card_createDispute: the charge succeeds, then is disputed.
    disputes: bool = False
    # A card whose issuer asks for 3-D Secure on every payment: the PaymentIntent waits in
    # `requires_action` until the customer authenticates.
    authentication: bool = False


_DECLINED = "Your card was declined."

# Stripe's test payment methods (https://docs.stripe.com/testing).
TEST_CARDS: dict[str, TestCard] = {
    "pm_card_visa": TestCard("visa", "4242"),
    "pm_card_us": TestCard("visa", "4242"),
    "pm_card_visa_debit": TestCard("visa", "5556", "debit"),
    "pm_card_mastercard": TestCard("mastercard", "4444"),
    "pm_card_mastercard_debit": TestCard("mastercard", "8210", "debit"),
    "pm_card_mastercard_prepaid": TestCard("mastercard", "5100", "prepaid"),
    "pm_card_amex": TestCard("amex", "8431"),
    "pm_card_discover": TestCard("discover", "1117"),
    "pm_card_diners": TestCard("diners", "0004"),
    "pm_card_jcb": TestCard("jcb", "0505"),
    "pm_card_unionpay": TestCard("unionpay", "0005"),
    "pm_card_createDispute": TestCard("visa", "0259", disputes=True),
    # Regulatory cards: 3-D Secure 2 required (4000 0000 0000 3220) and "always authenticate"
    # (4000 0027 6000 3184), https://docs.stripe.com/testing#regulatory-cards.
    "pm_card_threeDSecure2Required": TestCard("visa", "3220", authentication=True),
    "pm_card_authenticationRequired": TestCard("visa", "3184", authentication=True),
    "pm_card_chargeDeclined": TestCard(
        "visa", "0002", error_code="card_declined", decline_code="generic_decline",
        message=_DECLINED,
    ),
    "pm_card_chargeDeclinedInsufficientFunds": TestCard(
        "visa",
        "9995",
        error_code="card_declined",
        decline_code="insufficient_funds",
        message="Your card has insufficient funds.",
    ),
    "pm_card_chargeDeclinedLostCard": TestCard(
        "visa", "9987", error_code="card_declined", decline_code="lost_card", message=_DECLINED
    ),
    "pm_card_chargeDeclinedStolenCard": TestCard(
        "visa", "9979", error_code="card_declined", decline_code="stolen_card", message=_DECLINED
    ),
    "pm_card_chargeDeclinedFraudulent": TestCard(
        "visa", "0019", error_code="card_declined", decline_code="fraudulent", message=_DECLINED
    ),
    "pm_card_chargeDeclinedExpiredCard": TestCard(
        "visa", "0069", error_code="expired_card", decline_code="expired_card",
        message="Your card has expired.",
    ),
    "pm_card_chargeDeclinedIncorrectCvc": TestCard(
        "visa", "0127", error_code="incorrect_cvc", decline_code="incorrect_cvc",
        message="Your card's security code is incorrect.",
    ),
    "pm_card_chargeDeclinedProcessingError": TestCard(
        "visa", "0119", error_code="processing_error", decline_code="processing_error",
        message="An error occurred while processing your card. Try again in a little bit.",
    ),
}  # fmt: skip


def _address() -> dict[str, None]:
    return dict.fromkeys(("city", "country", "line1", "line2", "postal_code", "state"))


def payment_method(pm_id: str, card: TestCard, created: int) -> dict[str, Any]:
    """The PaymentMethod of a test card, as Stripe embeds it in an error and in a PaymentIntent's
    `last_payment_error` (https://docs.stripe.com/api/payment_methods/object)."""
    return {
        "id": pm_id,
        "object": "payment_method",
        "allow_redisplay": "unspecified",
        "billing_details": {
            "address": _address(),
            "email": None,
            "name": None,
            "phone": None,
            "tax_id": None,
        },
        "card": {
            "brand": card.brand,
            "checks": {
                "address_line1_check": None,
                "address_postal_code_check": None,
                "cvc_check": None,
            },
            "country": "US",
            "display_brand": card.brand,
            "exp_month": 12,
            "exp_year": 2034,
            "fingerprint": "SbxFp" + card.last4,
            "funding": card.funding,
            "generated_from": None,
            "last4": card.last4,
            "networks": {"available": [card.brand], "preferred": None},
            "regulated_status": "unregulated",
            "three_d_secure_usage": {"supported": True},
            "wallet": None,
        },
        "created": created,
        "customer": None,
        "customer_account": None,
        "livemode": False,
        "metadata": {},
        "type": "card",
    }


def payment_intent(
    *,
    amount: int,
    currency: str,
    created: int,
    payment_method: str | None,
    metadata: dict[str, str],
    description: str | None,
    receipt_email: str | None,
    payment_method_types: list[str],
    allowed_payment_method_types: list[str] | None,
    automatic_payment_methods: dict[str, Any] | None,
) -> dict[str, Any]:
    pi_id = new_id("pi")
    return {
        "id": pi_id,
        "object": "payment_intent",
        "allowed_payment_method_types": allowed_payment_method_types,
        "amount": amount,
        "amount_capturable": 0,
        "amount_details": {"tip": {}},
        "amount_received": 0,
        "application": None,
        "application_fee_amount": None,
        "automatic_payment_methods": automatic_payment_methods,
        "canceled_at": None,
        "cancellation_reason": None,
        "capture_method": "automatic",
        "client_secret": f"{pi_id}_secret_{new_id('s')[2:]}",
        "confirmation_method": "automatic",
        "created": created,
        "currency": currency,
        "customer": None,
        "customer_account": None,
        "description": description,
        "excluded_payment_method_types": None,
        "last_payment_error": None,
        "latest_charge": None,
        "livemode": False,
        "managed_payments": {"enabled": False},
        "metadata": metadata,
        "next_action": None,
        "on_behalf_of": None,
        "payment_method": payment_method,
        "payment_method_configuration_details": None,
        "payment_method_options": {
            "card": {
                "installments": None,
                "mandate_options": None,
                "network": None,
                "request_three_d_secure": "automatic",
            }
        },
        "payment_method_types": payment_method_types,
        "processing": None,
        "receipt_email": receipt_email,
        "review": None,
        "setup_future_usage": None,
        "shipping": None,
        "source": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "requires_payment_method" if payment_method is None else "requires_confirmation",
        "transfer_data": None,
        "transfer_group": None,
    }


def three_d_secure_authenticated() -> dict[str, Any]:
    """A charge's `payment_method_details.card.three_d_secure` after the customer completed a
    3-D Secure 2 challenge."""
    return {
        "authentication_flow": "challenge",
        "electronic_commerce_indicator": "05",
        "exemption_indicator": None,
        "exemption_indicator_applied": False,
        "result": "authenticated",
        "result_reason": None,
        "transaction_id": new_id("ds")[3:],
        "version": "2.2.0",
    }


def charge(
    *,
    pi: dict[str, Any],
    card: TestCard,
    created: int,
    base_url: str,
    error_code: str | None = None,
    decline_code: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """A charge of the PaymentIntent on the test card: succeeded, or failed with the card's decline
    (or the `error_code`/`decline_code`/`message` given). `balance_transaction` is null until the
    caller books one for a succeeded charge. No `refunds`: Stripe includes them only when
    expanded (state.embed_refunds)."""
    ch_id = new_id("ch")
    error_code = error_code or card.error_code
    decline_code = decline_code or card.decline_code
    message = message or card.message
    declined = error_code is not None
    return {
        "id": ch_id,
        "object": "charge",
        "amount": pi["amount"],
        "amount_captured": 0 if declined else pi["amount"],
        "amount_refunded": 0,
        "application": None,
        "application_fee": None,
        "application_fee_amount": None,
        "balance_transaction": None,
        "billing_details": {
            "address": _address(),
            "email": None,
            "name": None,
            "phone": None,
            "tax_id": None,
        },
        "calculated_statement_descriptor": "VOUCH SANDBOX",
        "captured": not declined,
        "created": created,
        "currency": pi["currency"],
        "customer": None,
        "description": pi["description"],
        "disputed": False,
        "failure_balance_transaction": None,
        "failure_code": error_code,
        "failure_message": message,
        "fraud_details": {},
        "livemode": False,
        "metadata": dict(pi["metadata"]),
        "on_behalf_of": None,
        "outcome": {
            "advice_code": None,
            "network_advice_code": None,
            "network_decline_code": None,
            "network_status": "declined_by_network" if declined else "approved_by_network",
            "reason": decline_code,
            "risk_level": "normal",
            "risk_score": 20,
            "seller_message": (
                "The bank did not return any further details with this decline."
                if declined
                else "Payment complete."
            ),
            "type": "issuer_declined" if declined else "authorized",
        },
        "paid": not declined,
        "payment_intent": pi["id"],
        "payment_method": pi["payment_method"],
        "payment_method_details": {
            "card": {
                "amount_authorized": None if declined else pi["amount"],
                "authorization_code": None if declined else "123456",
                "brand": card.brand,
                "checks": {
                    "address_line1_check": None,
                    "address_postal_code_check": None,
                    "cvc_check": "pass",
                },
                "country": "US",
                "exp_month": 12,
                "exp_year": 2034,
                "extended_authorization": {"status": "disabled"},
                "fingerprint": "SbxFp" + card.last4,
                "funding": card.funding,
                "incremental_authorization": {"status": "unavailable"},
                "installments": None,
                "last4": card.last4,
                "mandate": None,
                "multicapture": {"status": "unavailable"},
                "network": card.brand,
                "network_token": {"used": False},
                "network_transaction_id": None if declined else new_id("ntx")[4:],
                "overcapture": {"maximum_amount_capturable": pi["amount"], "status": "unavailable"},
                "regulated_status": "unregulated",
                "three_d_secure": None,
                "wallet": None,
            },
            "type": "card",
        },
        "receipt_email": pi["receipt_email"],
        "receipt_number": None,
        "receipt_url": f"{base_url}/receipts/payment/{ch_id}",
        "refunded": False,
        "review": None,
        "shipping": None,
        "source": None,
        "source_transfer": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "failed" if declined else "succeeded",
        "transfer_data": None,
        "transfer_group": None,
    }


def refund(
    *,
    charge: dict[str, Any],
    amount: int,
    reason: str | None,
    metadata: dict[str, str],
    created: int,
) -> dict[str, Any]:
    """A new refund, `succeeded` (Stripe's card refunds are, at once, in test mode);
    `balance_transaction` is booked by the caller. `failure_reason`, `failure_balance_transaction`,
    `pending_reason` and `next_action` appear with the status that has them
    (resources.refund_status_fields)."""
    return {
        "id": new_id("re"),
        "object": "refund",
        "amount": amount,
        "balance_transaction": None,
        "charge": charge["id"],
        "created": created,
        "currency": charge["currency"],
        "customer": None,
        "customer_account": None,
        "destination_details": {
            "card": {
                "reference": None,
                "reference_status": "pending",
                "reference_type": "acquirer_reference_number",
                "type": "refund",
            },
            "type": "card",
        },
        "metadata": metadata,
        "payment_intent": charge["payment_intent"],
        "payment_method": charge["payment_method"],
        "reason": reason,
        "receipt_number": None,
        "source_transfer_reversal": None,
        "status": "succeeded",
        "transfer_reversal": None,
    }


# How long after a card refund succeeds its acquirer reference number (ARN) appears, unless the
# command line or the control API says otherwise: Stripe fills `destination_details.card.reference`
# once the card network has it (https://docs.stripe.com/api/refunds/object#refund_object-
# destination_details-card-reference_status), days later at Stripe, seconds here.
REFERENCE_DELAY_MS = 5000


def acquirer_reference(refund_id: str) -> str:
    """The refund's ARN: 23 digits, as Visa and Mastercard write them, the same for a refund on
    every read (derived from its id)."""
    digits = str(int(hashlib.sha256(refund_id.encode()).hexdigest(), 16))
    return "7" + digits[:22]


def refund_reference_settle(
    refund: dict[str, Any], *, born: float, now: float, delay_ms: int
) -> None:
    """Fill a card refund's reference as Stripe does once the network has it: `pending` until the
    refund has succeeded and `delay_ms` passed since it was made, then `available` with the ARN;
    a refund that failed or was canceled while its reference was pending never gets one
    (`unavailable`). A reference once available or unavailable stays so."""
    details = refund.get("destination_details")
    card = details.get("card") if isinstance(details, dict) else None
    if not isinstance(card, dict) or card.get("reference_status") != "pending":
        return
    if refund.get("status") in ("failed", "canceled"):
        card["reference_status"] = "unavailable"
    elif refund.get("status") == "succeeded" and now >= born + delay_ms / 1000:
        card["reference"] = acquirer_reference(str(refund["id"]))
        card["reference_status"] = "available"
