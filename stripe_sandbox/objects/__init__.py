"""Stripe object shapes, one module per family: what a test-mode object of the pinned API version
(`API_VERSION`) holds. Callers import from here."""

from stripe_sandbox.objects.common import API_VERSION, event, file
from stripe_sandbox.objects.disputes import (
    CE3,
    CE3_REQUIRED_ACTIONS,
    DISPUTE_APPEAL_STAGES,
    DISPUTE_CLOSED,
    DISPUTE_REASONS,
    DISPUTE_RESPONDABLE,
    DISPUTE_STATUSES,
    EVIDENCE_FILE_FIELDS,
    EVIDENCE_TEXT_FIELDS,
    EVIDENCE_TEXT_MAX,
    EVIDENCE_TEXT_MAX_DEFAULT,
    VISA_COMPLIANCE,
    VISA_NETWORK_REASON_CODES,
    default_network_reason_code,
    dispute,
    enhanced_eligibility,
    enhanced_eligibility_types,
)
from stripe_sandbox.objects.payments import TEST_CARDS, TestCard, charge, payment_intent, refund

__all__ = [
    "API_VERSION",
    "CE3",
    "CE3_REQUIRED_ACTIONS",
    "DISPUTE_APPEAL_STAGES",
    "DISPUTE_CLOSED",
    "DISPUTE_REASONS",
    "DISPUTE_RESPONDABLE",
    "DISPUTE_STATUSES",
    "EVIDENCE_FILE_FIELDS",
    "EVIDENCE_TEXT_FIELDS",
    "EVIDENCE_TEXT_MAX",
    "EVIDENCE_TEXT_MAX_DEFAULT",
    "TEST_CARDS",
    "VISA_COMPLIANCE",
    "VISA_NETWORK_REASON_CODES",
    "TestCard",
    "charge",
    "default_network_reason_code",
    "dispute",
    "enhanced_eligibility",
    "enhanced_eligibility_types",
    "event",
    "file",
    "payment_intent",
    "refund",
]
