"""The envelope app's codes in a person's words (issue 41 item 5): one mapping per code, read by
the admin pages and the envelope's timeline. The API, the exports and the journal keep the codes;
the pages show them in a quiet "details" line."""

from __future__ import annotations

import re

from core.display import words_for
from envelopes.models import (
    AdjustmentKind,
    AdjustmentStatus,
    DisputeFundsStatus,
    FundingStatus,
    JournalEntry,
    LegOutcome,
)
from envelopes.selectors.leg_states import refusal_reason
from verification.selectors import verdict_label

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
ADJUSTMENT_STATUS_LABELS: dict[str, str] = {
    AdjustmentStatus.PROPOSED: "Waiting for a second person",
    AdjustmentStatus.APPLIED: "Approved and written to the journal",
    AdjustmentStatus.REJECTED: "Rejected (nothing moved)",
}
DISPUTE_FUNDS_STATUS_LABELS: dict[str, str] = {
    choice.value: str(choice.label) for choice in DisputeFundsStatus
}
# Stripe's dispute statuses (`dispute.status`), as the dispute-funds rows keep them.
PROVIDER_DISPUTE_STATUS_LABELS: dict[str, str] = {
    "warning_needs_response": "Inquiry: a response is due",
    "warning_under_review": "Inquiry under review",
    "warning_closed": "Inquiry closed",
    "needs_response": "A response is due",
    "under_review": "Under review",
    "won": "Won",
    "lost": "Lost",
    "prevented": "Prevented",
    "appeal_needs_response": "Appeal: a response is due",
    "appeal_under_review": "Appeal under review",
}

# Why Vouch read the provider (`ProviderRead.purpose`).
PROVIDER_READ_PURPOSE_LABELS: dict[str, str] = {
    "adjustment.propose": "Read when it was proposed",
    "adjustment.approve": "Read again at approval",
    "dispute.funds": "The dispute's money at Stripe",
    "refund.release": "Read before a release",
    "refund_reference": "The refund's reference at Stripe",
}


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def outcome_label(outcome: str | None) -> str:
    return words_for(OUTCOME_LABELS, outcome)


def funding_status_label(status: str | None) -> str:
    return words_for(FUNDING_STATUS_LABELS, status)


def journal_kind_label(kind: str | None) -> str:
    return words_for(JOURNAL_KIND_LABELS, kind)


def adjustment_status_label(status: str | None) -> str:
    return words_for(ADJUSTMENT_STATUS_LABELS, status)


def dispute_funds_status_label(status: str | None) -> str:
    return words_for(DISPUTE_FUNDS_STATUS_LABELS, status)


def provider_dispute_status_label(status: str | None) -> str:
    return words_for(PROVIDER_DISPUTE_STATUS_LABELS, status)


def provider_read_purpose_label(purpose: str | None) -> str:
    purpose = purpose or ""
    return PROVIDER_READ_PURPOSE_LABELS.get(purpose) or words_for({}, purpose.replace(".", "_"))


def refund_outcome_words(outcome: str, error_code: str = "") -> str:
    """A refund leg's outcome in words; a refusal says Stripe's reason (its code: details)."""
    if outcome == LegOutcome.REFUSED:
        return f"{outcome_label(outcome)}: {refusal_reason(error_code)}"
    return outcome_label(outcome)


# The notes the services write on journal entries (envelopes.services, envelopes.adjustments),
# each turned into a sentence; a note no pattern knows (a person's own words) stays as written.
_ID = r"(?P<id>\S+)"
_NOTES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^refused: (?P<code>\S*)$"), "refused"),
    (re.compile(r"^provider reports (?P<status>\w+)$"), "reports"),
    (re.compile(r"^verification (?P<verdict>[A-Z]+): ?(?P<reason>.*)$", re.S), "verdict"),
    (re.compile(rf"^dispute {_ID}: funds withdrawn \((?P<source>.*)\)$"), "withdrawn"),
    (re.compile(rf"^dispute {_ID}: lost \((?P<source>.*)\)$"), "lost"),
    (re.compile(rf"^dispute {_ID}: funds reinstated \((?P<source>.*)\)$"), "reinstated"),
    (re.compile(rf"^foreign refund {_ID} (?P<status>\w+) \((?P<source>.*)\)$"), "foreign"),
    (re.compile(rf"^(?P<kind>{'|'.join(k.value for k in AdjustmentKind)}) {_ID}$"), "adjust"),
)


def _note_sentence(shape: str, said: dict[str, str]) -> str:
    if shape == "refused":
        return f"Released: Stripe refused the refund ({refusal_reason(said['code'])})"
    if shape == "reports":
        return f"Released: Stripe reports the refund {said['status']}"
    if shape == "verdict":
        verdict = lower_first(verdict_label(said["verdict"]))
        reason = said["reason"].strip()
        return f"Released: the verification says {verdict}" + (f" ({reason})" if reason else "")
    if shape == "withdrawn":
        return f"Stripe withdrew the disputed money (dispute {said['id']})"
    if shape == "lost":
        return f"The dispute is lost: the held money is charged back (dispute {said['id']})"
    if shape == "reinstated":
        return f"Stripe gave the disputed money back (dispute {said['id']})"
    if shape == "foreign":
        return f"Released: the refund {said['id']} made outside Vouch is {said['status']} at Stripe"
    kind = AdjustmentKind(said["kind"])
    return f"{kind.label} (adjustment {said['id']})"


def journal_note_words(note: str) -> tuple[str, str]:
    """A journal entry's note as a sentence, and the note as written for the details line ("" when
    the note is already the sentence: a person's words, or one no pattern knows)."""
    for pattern, shape in _NOTES:
        match = pattern.match(note)
        if match:
            return _note_sentence(shape, match.groupdict()), note
    return note, ""
