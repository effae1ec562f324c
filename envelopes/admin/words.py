"""The envelope pages' codes in a person's words (issue 41 item 5): one mapping per code. The API,
the exports and the journal keep the codes; the pages show them in a quiet "details" line."""

from __future__ import annotations

from envelopes.models import FundingLeg, FundingStatus, JournalEntry, LegOutcome, RefundLeg
from envelopes.selectors.leg_states import refusal_reason

OUTCOME_LABELS: dict[str, str] = {
    LegOutcome.RESERVED: "Set aside, not sent to Stripe yet",
    LegOutcome.ACCEPTED: "Accepted by Stripe",
    LegOutcome.REFUSED: "Refused by Stripe",
    LegOutcome.UNKNOWN: "Stripe's answer not known yet",
    LegOutcome.VOID: "Never made by Stripe (money back)",
}
FUNDING_STATUS_LABELS: dict[str, str] = {
    FundingStatus.PENDING: "Waiting for Stripe's answer",
    FundingStatus.SUCCEEDED: "Charged",
    FundingStatus.ABANDONED: "Not charged (abandoned)",
}
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
JOURNAL_KIND_LABELS: dict[str, str] = {
    JournalEntry.Kind.FUND: "Funding",
    JournalEntry.Kind.DEBIT: "Debit",
    JournalEntry.Kind.RESERVE: "Set aside for a refund",
    JournalEntry.Kind.ACCEPT: "Refund accepted",
    JournalEntry.Kind.RELEASE: "Released back to unspent",
    JournalEntry.Kind.ADJUST: "Adjustment",
    JournalEntry.Kind.HOLD: "Held by a dispute",
    JournalEntry.Kind.REINSTATE: "Reinstated after a dispute",
    JournalEntry.Kind.CHARGEBACK: "Charged back",
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


def _words(labels: dict[str, str], code: str | None) -> str:
    code = code or ""
    return labels.get(code) or code.replace("_", " ").capitalize()


def outcome_label(outcome: str | None) -> str:
    return _words(OUTCOME_LABELS, outcome)


def funding_status_label(status: str | None) -> str:
    return _words(FUNDING_STATUS_LABELS, status)


def refund_status_label(status: str | None) -> str:
    return _words(REFUND_STATUS_LABELS, status)


def verification_status_label(status: str | None) -> str:
    return _words(VERIFICATION_STATUS_LABELS, status)


def journal_kind_label(kind: str | None) -> str:
    return _words(JOURNAL_KIND_LABELS, kind)


def balance_label(balance: str | None) -> str:
    return _words(BALANCE_WORDS, balance)


def refund_leg_words(leg: RefundLeg) -> str:
    """A refund leg's outcome in words; a refusal says Stripe's reason (its code: details)."""
    if leg.outcome == LegOutcome.REFUSED:
        return f"{outcome_label(leg.outcome)}: {refusal_reason(leg.error_code)}"
    return outcome_label(leg.outcome)


def leg_state_words(leg: RefundLeg | FundingLeg) -> str:
    """Where a refund or funding leg stands, in words."""
    if isinstance(leg, RefundLeg):
        return refund_leg_words(leg)
    return funding_status_label(leg.status)
