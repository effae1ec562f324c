"""The envelope pages' codes in a person's words (issue 41 item 5): one mapping per code, those the
timeline shares in envelopes.selectors.words. The API, the exports and the journal keep the codes;
the pages show them in a quiet "details" line."""

from __future__ import annotations

from envelopes.models import FundingLeg, RefundLeg
from envelopes.selectors.words import (
    FUNDING_STATUS_LABELS,
    JOURNAL_KIND_LABELS,
    OUTCOME_LABELS,
    funding_status_label,
    journal_kind_label,
    outcome_label,
    refund_outcome_words,
    words_for,
)

__all__ = [
    "BALANCE_WORDS",
    "FUNDING_STATUS_LABELS",
    "JOURNAL_KIND_LABELS",
    "OUTCOME_LABELS",
    "REFUND_STATUS_LABELS",
    "VERIFICATION_STATUS_LABELS",
    "balance_label",
    "funding_status_label",
    "journal_kind_label",
    "leg_state_words",
    "outcome_label",
    "refund_leg_words",
    "refund_status_label",
    "verification_status_label",
]

# `envelopes.selectors.refund_status` and `verification_status`.
REFUND_STATUS_LABELS: dict[str, str] = {
    "pending": "Pending",
    "refunded": "Refunded",
    "partially_refunded": "Partly refunded",
    "failed": "Refused",
}
VERIFICATION_STATUS_LABELS: dict[str, str] = {
    "pending": "Not decided yet",
    "verified": "Verified",
    "attention": "Needs attention",
    "not_applicable": "Nothing to verify",
}
# The ledger check's balances (`Breach.balance`).
BALANCE_WORDS: dict[str, str] = {
    "total_funded_micro": "Funded",
    "total_debited_micro": "Debited",
    "total_refunded_micro": "Refunded",
    "reserved_micro": "Reserved",
    "unspent_micro": "Unspent",
    "held_micro": "Held by dispute",
    "charged_back_micro": "Charged back",
}


def refund_status_label(status: str | None) -> str:
    return words_for(REFUND_STATUS_LABELS, status)


def verification_status_label(status: str | None) -> str:
    return words_for(VERIFICATION_STATUS_LABELS, status)


def balance_label(balance: str | None) -> str:
    return words_for(BALANCE_WORDS, balance)


def refund_leg_words(leg: RefundLeg) -> str:
    """A refund leg's outcome in words; a refusal says Stripe's reason (its code: details)."""
    return refund_outcome_words(leg.outcome, leg.error_code)


def leg_state_words(leg: RefundLeg | FundingLeg) -> str:
    """Where a refund or funding leg stands, in words."""
    if isinstance(leg, RefundLeg):
        return refund_leg_words(leg)
    return funding_status_label(leg.status)
