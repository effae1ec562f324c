"""PaymentIntents, charges and refunds as Stripe shows them, and Stripe's test cards."""

from __future__ import annotations

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
    automatic_payment_methods: bool,
) -> dict[str, Any]:
    pi_id = new_id("pi")
    return {
        "id": pi_id,
        "object": "payment_intent",
        "amount": amount,
        "amount_capturable": 0,
        "amount_details": {"tip": {}},
        "amount_received": 0,
        "application": None,
        "application_fee_amount": None,
        "automatic_payment_methods": (
            {"allow_redirects": "always", "enabled": True} if automatic_payment_methods else None
        ),
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


def charge(
    *,
    pi: dict[str, Any],
    card: TestCard,
    created: int,
    base_url: str,
) -> dict[str, Any]:
    ch_id = new_id("ch")
    declined = card.error_code is not None
    return {
        "id": ch_id,
        "object": "charge",
        "amount": pi["amount"],
        "amount_captured": 0 if declined else pi["amount"],
        "amount_refunded": 0,
        "application": None,
        "application_fee": None,
        "application_fee_amount": None,
        "balance_transaction": None if declined else new_id("txn"),
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
        "failure_code": card.error_code,
        "failure_message": card.message,
        "fraud_details": {},
        "livemode": False,
        "metadata": dict(pi["metadata"]),
        "on_behalf_of": None,
        "outcome": {
            "advice_code": None,
            "network_advice_code": None,
            "network_decline_code": None,
            "network_status": "declined_by_network" if declined else "approved_by_network",
            "reason": card.decline_code,
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
        "refunds": {
            "object": "list",
            "data": [],
            "has_more": False,
            "url": f"/v1/charges/{ch_id}/refunds",
        },
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
    return {
        "id": new_id("re"),
        "object": "refund",
        "amount": amount,
        "balance_transaction": new_id("txn"),
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
