"""Where a refund or funding leg stands, in a buyer's words (SPEC §10.1): a stable slug and a
sentence for each state, and a refund's status in words. A code meant for machines (Stripe's
error code) never reaches the sentence: it stays in the state's `details` line (issue 41)."""

from __future__ import annotations

from dataclasses import dataclass

from envelopes.models import FundingLeg, FundingStatus, LegOutcome, RefundLeg
from envelopes.selectors.data import failed_later
from verification.models import Verdict

# Why Stripe refused a refund, in words (the provider's error codes, SPEC §3).
_REFUSAL_REASONS = {
    "charge_disputed": "the payment is disputed, and Stripe says it can no longer be refunded",
    "amount_too_large": "it was more than the payment has left to refund",
    "charge_already_refunded": "the payment was already refunded in full",
    "charge_not_refundable": "Stripe cannot refund this payment",
    "resource_missing": "Stripe no longer finds the payment to refund",
}


def refusal_reason(code: str) -> str:
    """Why Stripe refused, in words; a code Vouch has no words for is said to be one (the code
    itself goes to the details line, never into the sentence)."""
    if not code:
        return "Stripe gave no reason"
    return _REFUSAL_REASONS.get(code, "Stripe gave a reason Vouch has no words for")


def code_details(code: str) -> str:
    """The details line that keeps Stripe's code for whoever needs it ("" when none)."""
    return f"Stripe's code: {code}" if code else ""


@dataclass(frozen=True)
class LegState:
    """A leg's state for people: a stable slug (`on_its_way`, `confirmed`, `refused`, `back`,
    `checking`, `pending`, `charged`, `not_charged`), the words, and a details line for codes
    ("" when none)."""

    slug: str
    text: str
    details: str = ""


# A leg waiting for room in Stripe's rate limit (issue 40), in the buyer's words.
QUEUED_TEXT = (
    "On its way: queued for Stripe, which takes a limited number of refunds a second. Vouch "
    "sends it as soon as there is room, in turn; the money stays set aside meanwhile and it can "
    "never be sent twice."
)


def refund_leg_state(leg: RefundLeg) -> LegState:
    """Where one refund leg stands: on its way (reserved, unknown, or accepted and not yet read
    back), confirmed by Stripe (verified), refused and why (its money back in the envelope), money
    back in the envelope (Stripe later failed it, or never made it), or being checked by a person
    (a bad verdict that moves no money until a person decides)."""
    if leg.outcome == LegOutcome.REFUSED:
        return LegState(
            "refused",
            f"Refused by Stripe: {refusal_reason(leg.error_code)}. "
            "The money is back in your envelope.",
            code_details(leg.error_code),
        )
    if leg.outcome == LegOutcome.VOID:
        return LegState("back", "Money back in your envelope: Stripe never made this refund.")
    if leg.released:
        return LegState(
            "back",
            "Money back in your envelope: Stripe later reported this refund failed.",
        )
    if leg.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN) and leg.deferred_at is not None:
        return LegState("on_its_way", QUEUED_TEXT)
    if leg.outcome == LegOutcome.RESERVED:
        return LegState("on_its_way", "On its way: being sent to Stripe.")
    if leg.outcome == LegOutcome.UNKNOWN:
        return LegState(
            "on_its_way",
            "On its way: Stripe's answer has not arrived. Vouch asks again with the same key (it "
            "can never refund twice); the money stays set aside meanwhile.",
        )
    verdict = leg.verification_run.verdict if leg.verification_run else Verdict.PENDING
    if verdict == Verdict.VERIFIED:
        return LegState("confirmed", "Confirmed by Stripe: the money is going back to the card.")
    if verdict == Verdict.PENDING:
        return LegState(
            "on_its_way", "On its way: Stripe accepted it; Vouch is reading it back from Stripe."
        )
    return LegState(
        "checking",
        "Being checked: Stripe accepted it, but reading it back did not confirm it. A person at "
        "Vouch is looking into it; no money is lost meanwhile.",
    )


def funding_leg_state(leg: FundingLeg, verdict: str | None) -> LegState:
    """Where one funding charge stands: pending (not money in the envelope yet), charged,
    confirmed by Stripe (its charge read back), or not charged (Stripe holds no payment)."""
    if leg.status == FundingStatus.PENDING:
        return LegState(
            "pending",
            "On its way: Stripe's answer on this payment is not in yet; it is not money in the "
            "envelope until it is.",
        )
    if leg.status == FundingStatus.ABANDONED:
        return LegState(
            "not_charged", "Not charged: Stripe holds no payment for it; it never counted."
        )
    if verdict == Verdict.VERIFIED:
        return LegState("confirmed", "Confirmed by Stripe: the payment was read back from Stripe.")
    return LegState("charged", "Charged: Stripe accepted the payment.")


_REFUND_STATUS_TEXT = {
    "pending": "on its way",
    "refunded": "sent to the cards",
    "partially_refunded": "partly refused: the refused part is back in your envelope",
    "failed": "refused: the money is back in your envelope",
}
# The same, when some leg Stripe accepted later failed (SPEC §3, "Later failure"): never "sent".
_FAILED_LATER_TEXT = {
    "partially_refunded": (
        "partly failed: Stripe accepted it, then reported part of it failed (or refused part); "
        "that part is back in your envelope"
    ),
    "failed": (
        "failed later: Stripe accepted it, then reported it failed; the money is back in your "
        "envelope"
    ),
}


def refund_status_text(status: str, legs: list[RefundLeg]) -> str:
    """A refund's status in words: what Stripe last said of every leg."""
    if status in _FAILED_LATER_TEXT and any(failed_later(leg) for leg in legs):
        return _FAILED_LATER_TEXT[status]
    return _REFUND_STATUS_TEXT[status]
