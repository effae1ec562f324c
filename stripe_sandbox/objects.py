"""Stripe object shapes, after Stripe's published fixtures (../shared/stripe/fixtures3.json):
every top-level field of the fixture is present, with the values a test-mode object has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stripe_sandbox.ids import new_id

API_VERSION = "2026-10-28.endive"


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


EVIDENCE_TEXT_FIELDS = (
    "access_activity_log",
    "billing_address",
    "cancellation_policy_disclosure",
    "cancellation_rebuttal",
    "customer_email_address",
    "customer_name",
    "customer_purchase_ip",
    "duplicate_charge_explanation",
    "duplicate_charge_id",
    "product_description",
    "refund_policy_disclosure",
    "refund_refusal_explanation",
    "service_date",
    "shipping_address",
    "shipping_carrier",
    "shipping_date",
    "shipping_tracking_number",
    "uncategorized_text",
)
# Stripe's published bound on each evidence text field (openapi: dispute_evidence_params).
EVIDENCE_TEXT_MAX_DEFAULT = 20_000
EVIDENCE_TEXT_MAX = dict.fromkeys(
    (
        "billing_address",
        "customer_email_address",
        "customer_name",
        "customer_purchase_ip",
        "duplicate_charge_id",
        "service_date",
        "shipping_address",
        "shipping_carrier",
        "shipping_date",
        "shipping_tracking_number",
    ),
    5_000,
)
EVIDENCE_FILE_FIELDS = (
    "cancellation_policy",
    "customer_communication",
    "customer_signature",
    "duplicate_charge_documentation",
    "receipt",
    "refund_policy",
    "service_documentation",
    "shipping_documentation",
    "uncategorized_file",
)
DISPUTE_REASONS = frozenset(
    {
        "bank_cannot_process",
        "check_returned",
        "credit_not_processed",
        "customer_initiated",
        "debit_not_authorized",
        "duplicate",
        "fraudulent",
        "general",
        "incorrect_account_details",
        "insufficient_funds",
        "noncompliant",
        "product_not_received",
        "product_unacceptable",
        "subscription_canceled",
        "unrecognized",
    }
)
DISPUTE_STATUSES = frozenset(
    {
        "warning_needs_response",
        "warning_under_review",
        "warning_closed",
        "needs_response",
        "under_review",
        "won",
        "lost",
        "prevented",
        # Stripe API 2026-10-28.endive: a lost dispute the network lets the merchant appeal.
        "appeal_needs_response",
        "appeal_under_review",
    }
)
DISPUTE_CLOSED = frozenset({"warning_closed", "won", "lost", "prevented"})
DISPUTE_RESPONDABLE = frozenset({"needs_response", "warning_needs_response"})
DISPUTE_APPEAL_STAGES = frozenset({"appeal_needs_response", "appeal_under_review"})

# The Visa reason code a dispute of each Stripe reason carries by default (none for the reasons
# no card network's code stands behind, and none for other brands).
VISA_NETWORK_REASON_CODES = {
    "fraudulent": "10.4",  # Other Fraud, card-absent environment
    "duplicate": "12.6.1",
    "product_not_received": "13.1",
    "subscription_canceled": "13.2",
    "general": "13.3",
    "product_unacceptable": "13.3",
    "credit_not_processed": "13.7",
    "noncompliant": "compliance",
}
CE3 = "visa_compelling_evidence_3"
VISA_COMPLIANCE = "visa_compliance"
CE3_REQUIRED_ACTIONS = (
    "missing_customer_identifiers",
    "missing_disputed_transaction_description",
    "missing_merchandise_or_services",
    "missing_prior_undisputed_transaction_description",
    "missing_prior_undisputed_transactions",
)


def default_network_reason_code(brand: str, reason: str) -> str | None:
    return VISA_NETWORK_REASON_CODES.get(reason) if brand == "visa" else None


def enhanced_eligibility_types(
    brand: str, reason: str, network_reason_code: str | None
) -> list[str]:
    """The enhanced evidence programs a dispute may use: Visa Compelling Evidence 3.0 for a
    card-absent fraud dispute (Visa 10.4), Visa compliance for a `noncompliant` one."""
    if brand != "visa":
        return []
    types = [CE3] if network_reason_code == "10.4" else []
    return types + ([VISA_COMPLIANCE] if reason == "noncompliant" else [])


def enhanced_eligibility(types: list[str]) -> dict[str, Any]:
    """`evidence_details.enhanced_eligibility` before any enhanced evidence is given."""
    eligibility: dict[str, Any] = {}
    if CE3 in types:
        eligibility[CE3] = {
            "required_actions": [
                "missing_customer_identifiers",
                "missing_disputed_transaction_description",
                "missing_merchandise_or_services",
                "missing_prior_undisputed_transactions",
            ],
            "status": "requires_action",
        }
    if VISA_COMPLIANCE in types:
        eligibility[VISA_COMPLIANCE] = {"status": "requires_fee_acknowledgement"}
    return eligibility


def dispute(
    *,
    charge: dict[str, Any],
    amount: int,
    reason: str,
    created: int,
    due_by: int,
    network_reason_code: str | None,
) -> dict[str, Any]:
    card = charge["payment_method_details"]["card"]
    eligible = enhanced_eligibility_types(card["brand"], reason, network_reason_code)
    evidence: dict[str, Any] = dict.fromkeys(EVIDENCE_TEXT_FIELDS + EVIDENCE_FILE_FIELDS)
    evidence["enhanced_evidence"] = {}
    # The appeal's response (`reason_for_filing`, `supporting_files`), once an appeal is open.
    evidence["appeal"] = None
    return {
        "id": new_id("dp"),
        "object": "dispute",
        "amount": amount,
        "balance_transactions": [],
        "charge": charge["id"],
        "created": created,
        "currency": charge["currency"],
        "enhanced_eligibility_types": eligible,
        "evidence": dict(sorted(evidence.items())),
        "evidence_details": {
            "appeal_eligible": False,
            "due_by": due_by,
            "enhanced_eligibility": enhanced_eligibility(eligible),
            "has_evidence": False,
            "past_due": False,
            "submission_count": 0,
            "submission_method": "not_submitted",
        },
        # The account's default: Stripe may submit with Smart Disputes unless told `manual`.
        "intended_submission_method": None,
        "is_charge_refundable": False,
        "livemode": False,
        "metadata": {},
        "payment_intent": charge["payment_intent"],
        "payment_method_details": {
            "card": {
                "brand": card["brand"],
                "case_type": "chargeback",
                "network_reason_code": network_reason_code,
                "network": card["network"],
            },
            "type": "card",
        },
        "reason": reason,
        "status": "needs_response",
    }


def file(
    *, purpose: str, filename: str, size: int, file_type: str, created: int, base_url: str
) -> dict[str, Any]:
    file_id = new_id("file")
    return {
        "id": file_id,
        "object": "file",
        "created": created,
        "expires_at": None,
        "filename": filename,
        "links": {
            "object": "list",
            "data": [],
            "has_more": False,
            "url": f"/v1/file_links?file={file_id}",
        },
        "purpose": purpose,
        "size": size,
        "title": None,
        "type": file_type,
        "url": f"{base_url}/v1/files/{file_id}/contents",
    }


def event(
    *,
    type: str,
    data_object: dict[str, Any],
    previous_attributes: dict[str, Any] | None,
    created: int,
    request_id: str | None,
    idempotency_key: str | None,
    pending_webhooks: int,
) -> dict[str, Any]:
    data: dict[str, Any] = {"object": data_object}
    if previous_attributes is not None:
        data["previous_attributes"] = previous_attributes
    return {
        "id": new_id("evt"),
        "object": "event",
        "api_version": API_VERSION,
        "created": created,
        "data": data,
        "livemode": False,
        "pending_webhooks": pending_webhooks,
        "request": {"id": request_id, "idempotency_key": idempotency_key},
        "type": type,
    }
