"""Disputes as Stripe shows them: evidence fields, reasons, statuses, network reason codes and
the enhanced evidence programs."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.ids import new_id

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

# The Visa reason code a dispute of each Stripe reason carries by default
# (https://docs.stripe.com/disputes/categories); none for the reasons no Visa code stands behind,
# and none for other brands, whose codes the sandbox does not assume.
VISA_NETWORK_REASON_CODES = {
    "fraudulent": "10.4",  # Other Fraud, card-absent environment
    "duplicate": "12.6.1",
    "product_not_received": "13.1",
    "subscription_canceled": "13.2",
    "general": "13.3",
    "product_unacceptable": "13.3",
    "credit_not_processed": "13.7",
}  # a Visa `noncompliant` dispute is a compliance case (case_type), with no reason code known
CE3 = "visa_compelling_evidence_3"
VISA_COMPLIANCE = "visa_compliance"
# Changelog 2026-06-24.dahlia: a Mastercard compliance dispute (reason `noncompliant`).
MASTERCARD_COMPLIANCE = "mastercard_compliance"
COMPLIANCE_PROGRAMS = {"visa": VISA_COMPLIANCE, "mastercard": MASTERCARD_COMPLIANCE}
CE3_REQUIRED_ACTIONS = (
    "missing_customer_identifiers",
    "missing_disputed_transaction_description",
    "missing_merchandise_or_services",
    "missing_prior_undisputed_transaction_description",
    "missing_prior_undisputed_transactions",
)
# `payment_method_details.card.case_type`: an inquiry (`warning_*` statuses, no funds withdrawn),
# a chargeback, or a network compliance case (Visa or Mastercard, reason `noncompliant`).
CASE_TYPES = frozenset({"inquiry", "chargeback", "compliance"})
INQUIRY_STATUSES = frozenset({"warning_needs_response", "warning_under_review", "warning_closed"})


def default_network_reason_code(brand: str, reason: str) -> str | None:
    return VISA_NETWORK_REASON_CODES.get(reason) if brand == "visa" else None


def default_case_type(brand: str, reason: str) -> str:
    """A `noncompliant` Visa or Mastercard dispute is a compliance case, any other a chargeback
    (https://docs.stripe.com/disputes/api/visa-compliance,
    https://docs.stripe.com/disputes/api/mastercard-compliance)."""
    return (
        "compliance" if reason == "noncompliant" and brand in COMPLIANCE_PROGRAMS else "chargeback"
    )


def enhanced_eligibility_types(
    brand: str, reason: str, network_reason_code: str | None, case_type: str = "chargeback"
) -> list[str]:
    """The enhanced evidence programs a dispute may use: Visa Compelling Evidence 3.0 for a
    card-absent fraud dispute (Visa 10.4), Visa or Mastercard compliance for a compliance case."""
    types = [CE3] if brand == "visa" and network_reason_code == "10.4" else []
    if case_type == "compliance" and brand in COMPLIANCE_PROGRAMS:
        types.append(COMPLIANCE_PROGRAMS[brand])
    return sorted(types)


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
    for program in (MASTERCARD_COMPLIANCE, VISA_COMPLIANCE):
        if program in types:
            eligibility[program] = {"status": "requires_fee_acknowledgement"}
    return eligibility


def appeal_response(
    reason_for_filing: str | None = None, supporting_files: list[str] | None = None
) -> dict[str, Any]:
    """`evidence.appeal` once an appeal is open: the response nests under `card`
    (SDK `Dispute.Evidence.Appeal.Card`; changelog 2026-10-28.endive)."""
    return {
        "card": {
            "reason_for_filing": reason_for_filing,
            "supporting_files": list(supporting_files or []),
        }
    }


def dispute(
    *,
    charge: dict[str, Any],
    amount: int,
    reason: str,
    created: int,
    due_by: int,
    network_reason_code: str | None,
    case_type: str | None = None,
) -> dict[str, Any]:
    """A new dispute: an inquiry opens `warning_needs_response`, any other case
    `needs_response`. `due_by` 0 when the bank allows no response. What Stripe fills from
    money and refunds (`balance_transactions`, `is_charge_refundable`) the resources set."""
    card = charge["payment_method_details"]["card"]
    case_type = case_type or default_case_type(card["brand"], reason)
    eligible = enhanced_eligibility_types(card["brand"], reason, network_reason_code, case_type)
    evidence: dict[str, Any] = dict.fromkeys(EVIDENCE_TEXT_FIELDS + EVIDENCE_FILE_FIELDS)
    evidence["enhanced_evidence"] = {}
    evidence["appeal"] = None  # appeal_response() once an appeal is open
    inquiry = case_type == "inquiry"
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
            "due_by": due_by,
            "enhanced_eligibility": enhanced_eligibility(eligible),
            "has_evidence": False,
            "past_due": False,
            "submission_count": 0,
            "submission_method": "not_submitted",
        },
        # The account's default: Stripe may submit with Smart Disputes unless told `manual`.
        "intended_submission_method": None,
        "is_charge_refundable": inquiry,
        "livemode": False,
        "metadata": {},
        "network_reason_code": network_reason_code,
        "payment_intent": charge["payment_intent"],
        "payment_method_details": {
            "card": {
                "brand": card["brand"],
                "case_type": case_type,
                "network": card["network"],
                "network_reason_code": network_reason_code,
            },
            "type": "card",
        },
        "reason": reason,
        "status": "warning_needs_response" if inquiry else "needs_response",
    }
