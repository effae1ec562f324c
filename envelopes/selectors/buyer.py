"""What the buyer's own pages show (SPEC §10.1): their envelopes with balances, one envelope with
its funding legs, debits and refunds (each leg's state in plain words), the refund form's
last-in-first-out preview, and every refusal and outcome in words. Owner only: another buyer's
envelope is the same NotFound as a missing one (SPEC §5). Amounts stay integer micro-dollars
here; the templates show them as dollars (core.display through `{% load vouch %}`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from core.amounts import AmountUnreadable, dollars_read
from core.display import MICRO_PER_DOLLAR, dollars
from core.exceptions import VouchError
from envelopes.exceptions import InvalidAmount
from envelopes.models import (
    Envelope,
    FundingLeg,
    FundingStatus,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.selectors.data import (
    charged_back_words,
    envelope_get_owned,
    envelopes_of,
    held_note,
    held_words,
    refund_preview,
    refund_status,
)
from envelopes.selectors.leg_states import (
    LegState,
    funding_leg_state,
    refund_leg_state,
    refund_status_text,
)
from envelopes.services.funding import CHARGE_CONTRACT  # a name, not a write
from verification.models import VerificationRun

if TYPE_CHECKING:
    from accounts.models import User

ENVELOPES_PER_PAGE = 20
# The largest amount the form takes: no envelope holds more (SPEC §1, $5,000.00 of funding).
MAX_FORM_MICRO = 5_000_000_000


# --- money under review --------------------------------------------------------------------------

# Money on a funding charge that a person at Vouch is reviewing — a refund made outside Vouch (the
# Stripe Dashboard) that Stripe's event showed and no adjustment has recorded yet (issue 37, item
# 8). Told by the app that finds it: reconciliation, which stands above envelopes, registers its
# open `refund_foreign` discrepancies here (reconciliation.events), so the buyer is told at once
# and the money is told apart from what can be refunded, without envelopes reading its tables.
UnderReview = Callable[[list[str]], dict[str, int]]  # charge ids -> micro-dollars under review
_UNDER_REVIEW: list[UnderReview] = []


def under_review_register(source: UnderReview) -> None:
    if source not in _UNDER_REVIEW:
        _UNDER_REVIEW.append(source)


def money_under_review(charge_ids: list[str]) -> dict[str, int]:
    """Micro-dollars under review on each of these charges (absent: none), as every registered
    source tells it."""
    found: dict[str, int] = {}
    ids = [charge for charge in charge_ids if charge]
    for source in _UNDER_REVIEW if ids else []:
        for charge, micro in source(ids).items():
            found[charge] = found.get(charge, 0) + micro
    return found


class RefundUnderReview(VouchError):
    """The refund would return money a person at Vouch is reviewing (refunded outside Vouch, not
    recorded yet): refused before anything is sent to Stripe, which would refuse it anyway."""

    code = "refund_under_review"
    status_code = 409
    default_message = "Part of this money was refunded outside Vouch and is being reviewed."


# --- the list ------------------------------------------------------------------------------------


def buyer_envelopes_page(*, user: User, number: Any, per_page: int | None = None) -> Page:
    """One page of the caller's envelopes, newest first, ENVELOPES_PER_PAGE to a page (a page
    number that is not one gives the first page; one past the end, the last)."""
    return Paginator(envelopes_of(user=user), per_page or ENVELOPES_PER_PAGE).get_page(number)


# --- one envelope --------------------------------------------------------------------------------


def dispute_money_words(held_micro: int, charged_back_micro: int) -> list[str]:
    """What disputes hold or took of some money, in words (none when nothing)."""
    words = []
    if held_micro:
        words.append(held_words(held_micro))
    if charged_back_micro:
        words.append(charged_back_words(charged_back_micro))
    return words


def funding_label(*, kind: str, sequence: int) -> str:
    """A payment into an envelope, as the buyer reads it everywhere: "original payment", or the
    top-ups numbered from 1 (`sequence` counts the original payment as 1, issue 41)."""
    if kind == FundingLeg.Kind.ORIGINAL:
        return "original payment"
    return f"top-up #{max(1, sequence - 1)}"


def _funding_label(leg: FundingLeg) -> str:
    return funding_label(kind=leg.kind, sequence=leg.sequence)


@dataclass(frozen=True)
class FundingRow:
    leg: FundingLeg
    label: str
    state: LegState
    under_review_micro: int = 0  # refunded outside Vouch, being reviewed

    @property
    def review_text(self) -> str:
        if not self.under_review_micro:
            return ""
        return (
            f"{dollars(self.under_review_micro)} of this payment was refunded outside Vouch and is "
            "being reviewed by a person at Vouch. It cannot be refunded again meanwhile; the "
            "envelope's balances change when the review records it."
        )

    @property
    def disputed(self) -> list[str]:
        """What a dispute on this payment holds or took, in words."""
        return dispute_money_words(self.leg.held_micro, self.leg.charged_back_micro)


@dataclass(frozen=True)
class RefundLegRow:
    leg: RefundLeg
    label: str  # the funding payment it goes back to
    state: LegState


@dataclass(frozen=True)
class RefundRow:
    refund: RefundOperation
    status: str  # refund_status: pending | refunded | partially_refunded | failed
    status_text: str
    refunded_micro: int  # accepted and not given back
    back_micro: int  # refused or failed later: back in the envelope
    legs: list[RefundLegRow] = field(default_factory=list)


@dataclass(frozen=True)
class EnvelopePage:
    envelope: Envelope
    funding: list[FundingRow]
    debits: list[Any]
    refunds: list[RefundRow]

    @property
    def pending_funding(self) -> bool:
        return any(row.state.slug == "pending" for row in self.funding)

    @property
    def held_text(self) -> str:
        """Why money is held (SPEC §18), or "" when nothing is."""
        held = self.envelope.held_micro
        return held_words(held) if held else ""

    @property
    def charged_back_text(self) -> str:
        """What lost disputes took (final), or "" when nothing."""
        taken = self.envelope.charged_back_micro
        return charged_back_words(taken) if taken else ""


def buyer_envelope_page(*, user: User, envelope_id: str) -> EnvelopePage:
    """The caller's envelope with its funding legs (oldest first), debits (oldest first) and
    refunds (newest first), each leg's state in words; NotFound for another buyer's."""
    envelope = envelope_get_owned(user=user, envelope_id=envelope_id)
    funding = list(envelope.funding_legs.order_by("sequence"))
    # Each funding charge's read-back: the run keyed by the leg's idempotency key (found through
    # the runs' (contract, operation) index).
    verdicts = dict(
        VerificationRun.objects.filter(
            contract_id=CHARGE_CONTRACT, operation_id__in=[leg.idempotency_key for leg in funding]
        ).values_list("operation_id", "verdict")
    )
    labels = {leg.pk: _funding_label(leg) for leg in funding}
    legs_by_refund: dict[int, list[RefundLeg]] = {}
    for leg in _refund_legs().filter(operation__envelope=envelope):
        legs_by_refund.setdefault(leg.operation_id, []).append(leg)
    refunds = [
        _refund_row(refund, legs_by_refund.get(refund.pk, []), labels)
        for refund in envelope.refunds.order_by("-created_at", "-id")
    ]
    review = money_under_review([leg.charge_id for leg in funding])
    return EnvelopePage(
        envelope=envelope,
        funding=[
            FundingRow(
                leg,
                labels[leg.pk],
                funding_leg_state(leg, verdicts.get(leg.idempotency_key)),
                review.get(leg.charge_id, 0),
            )
            for leg in funding
        ],
        debits=list(envelope.debits.order_by("created_at", "id")),
        refunds=refunds,
    )


def _refund_legs() -> QuerySet[RefundLeg]:
    return (
        RefundLeg.objects.select_related("funding_leg", "verification_run")
        .only(
            *(f.name for f in RefundLeg._meta.concrete_fields),
            "funding_leg__charge_id",
            "verification_run__verdict",
        )
        .order_by("sequence")
    )


def _refund_row(
    refund: RefundOperation, legs: list[RefundLeg], labels: dict[int, str]
) -> RefundRow:
    status = refund_status(legs)
    return RefundRow(
        refund=refund,
        status=status,
        status_text=refund_status_text(status, legs),
        refunded_micro=sum(
            leg.amount_micro
            for leg in legs
            if leg.outcome == LegOutcome.ACCEPTED and not leg.released
        ),
        back_micro=sum(leg.amount_micro for leg in legs if leg.released),
        legs=[
            RefundLegRow(
                leg=leg, label=labels.get(leg.funding_leg_id, ""), state=refund_leg_state(leg)
            )
            for leg in legs
        ],
    )


def buyer_refund_row(*, refund: RefundOperation) -> RefundRow:
    """One refund as the envelope's page shows it, its status and each leg's state in words
    (also what the confirmation page of an assistant's refund request shows, once confirmed)."""
    labels = {
        leg.pk: _funding_label(leg)
        for leg in FundingLeg.objects.filter(envelope_id=refund.envelope_id).only(
            "pk", "kind", "sequence"
        )
    }
    return _refund_row(refund, list(_refund_legs().filter(operation=refund)), labels)


# --- the refund form -----------------------------------------------------------------------------


def dollars_to_micro(text: str) -> int:
    """The amount a person typed, in dollars (`12.50`, `$12.50`, `5,00`, `0.01`: core.amounts), as
    micro-dollars: at least one cent, whole cents, at most MAX_FORM_MICRO; else `invalid_amount`
    in words (`1,000` is refused: a comma is never a thousands separator)."""
    try:
        amount = dollars_read(text)
    except AmountUnreadable as unreadable:
        raise InvalidAmount(unreadable.message) from None
    if amount < Decimal("0.01"):
        raise InvalidAmount("A refund is at least one cent ($0.01).")
    if amount * MICRO_PER_DOLLAR > MAX_FORM_MICRO:
        raise InvalidAmount(f"A refund is at most {dollars(MAX_FORM_MICRO)}.")
    if amount != amount.quantize(Decimal("0.01")):
        raise InvalidAmount("Enter whole cents: at most two digits after the decimal point.")
    return int(amount * MICRO_PER_DOLLAR)


@dataclass(frozen=True)
class PreviewLeg:
    label: str
    charge: str
    amount_micro: int


@dataclass(frozen=True)
class RefundPreview:
    """What confirming would refund now: `amount_micro` None is everything unspent."""

    amount_micro: int | None
    requested_micro: int
    total_micro: int
    remainder_micro: int
    unspent_micro: int
    legs: list[PreviewLeg]
    expected: str  # the legs as confirmed (JSON), checked again under the envelope's lock
    held_note: str | None = None  # why money a dispute holds is not part of it (SPEC §18)


def buyer_refund_preview(*, envelope: Envelope, amount_micro: int | None) -> RefundPreview:
    """The last-in-first-out refund confirming would make now (envelopes.selectors.refund_preview:
    the refund's own allocation), newest payment first; refuses as the refund would."""
    preview = refund_preview(envelope=envelope, amount_micro=amount_micro)
    labels = {
        leg.public_id: _funding_label(leg)
        for leg in envelope.funding_legs.only("public_id", "kind", "sequence")
    }
    _refuse_money_under_review(envelope, preview["legs"], labels)
    legs = [
        PreviewLeg(labels.get(leg["funding_id"], ""), leg["charge"] or "", leg["amount_micro"])
        for leg in preview["legs"]
    ]
    shape = [
        preview["requested_micro"],
        [[leg["funding_id"], leg["amount_micro"]] for leg in preview["legs"]],
    ]
    return RefundPreview(
        amount_micro=amount_micro,
        requested_micro=preview["requested_micro"],
        total_micro=preview["total_micro"],
        remainder_micro=preview["remainder_micro"],
        unspent_micro=preview["unspent_micro"],
        legs=legs,
        expected=json.dumps(shape, separators=(",", ":")),
        held_note=preview["held_note"],
    )


def _refuse_money_under_review(
    envelope: Envelope, legs: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    """RefundUnderReview when the refund would take, from a payment, money a person is reviewing
    there (what is under review comes out of what that payment has left to refund), saying how
    much, on which payment, and how much can be refunded now."""
    funding = list(envelope.funding_legs.filter(status=FundingStatus.SUCCEEDED))
    review = money_under_review([leg.charge_id for leg in funding])
    if not review:
        return
    free = {
        leg.public_id: max(0, leg.capacity_micro - review.get(leg.charge_id, 0)) for leg in funding
    }
    taken = {leg["funding_id"]: leg["amount_micro"] for leg in legs}
    over = [leg for leg in funding if taken.get(leg.public_id, 0) > free[leg.public_id]]
    if not over:
        return
    named = " and ".join(
        f"{dollars(review[leg.charge_id])} of the {labels.get(leg.public_id, 'payment')}"
        for leg in over
    )
    can = min(envelope.unspent_micro, _refundable_newest_first(funding, review))
    raise RefundUnderReview(
        f"Nothing was refunded: {named} {'was' if len(over) == 1 else 'were'} refunded outside "
        f"Vouch and {'is' if len(over) == 1 else 'are'} being reviewed by a person at Vouch. "
        "That money cannot be refunded again while it is reviewed, so "
        + (f"up to {dollars(can)} can be refunded now." if can else "nothing can be refunded now."),
        details={
            "under_review_micro": {leg.charge_id: review[leg.charge_id] for leg in over},
            "refundable_micro": can,
        },
    )


def _refundable_newest_first(funding: list[FundingLeg], review: dict[str, int]) -> int:
    """The most a refund can take now without reaching money under review: the refund takes the
    newest payment first (SPEC §3), so it can take every newer payment's capacity and, on the
    newest payment with money under review, only what is not under review, and go no further."""
    total = 0
    for leg in sorted(funding, key=lambda leg: leg.sequence, reverse=True):
        under = review.get(leg.charge_id, 0)
        if under:
            return total + max(0, leg.capacity_micro - under)
        total += leg.capacity_micro
    return total


def refund_review_check(*, envelope: Envelope, amount_micro: int | None) -> None:
    """The refund form's confirmation: RefundUnderReview as the preview would say it, checked
    again before the refund is sent (any other refusal is the refund's own to make)."""
    try:
        buyer_refund_preview(envelope=envelope, amount_micro=amount_micro)
    except RefundUnderReview:
        raise
    except VouchError:
        return


def expected_shape(text: str) -> tuple[int, list[tuple[str, int]]] | None:
    """The preview a person confirmed, as `envelope_refund(expected=…)` compares it; None when the
    form carries none (or a damaged one: the refund is then checked against nothing it showed).
    Damaged is anything but `[requested, [[funding id, amount], …]]` with amounts as `_micro`
    takes them, however deep its nesting (issue 38, item 5: 1e400 and 3,000 `[` were 500s)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], list)):
        return None
    requested, legs = _micro(parsed[0]), []
    for leg in parsed[1]:
        if not (isinstance(leg, list) and len(leg) == 2 and isinstance(leg[0], str)):
            return None
        amount = _micro(leg[1])
        if amount is None or not leg[0].isascii():  # a funding id is ASCII (`fl_…`)
            return None
        legs.append((leg[0], amount))
    return None if requested is None else (requested, legs)


def _micro(value: object) -> int | None:
    """An amount a preview shows: a JSON integer from 0 below 2**63 (a BigIntegerField), never a
    bool (an int to Python), a float (1e400, NaN) or a negative; else None."""
    return value if type(value) is int and 0 <= value < 2**63 else None


def refusal_text(error: VouchError, *, envelope: Envelope | None = None) -> str:
    """A refusal of the refund form in words (every code the form can meet; any other by its
    message: the page keeps the code in a details line)."""
    unspent = dollars(envelope.unspent_micro) if envelope is not None else ""
    # Money a dispute holds is not unspent: say so where a refund meets it (SPEC §18).
    held = held_note(envelope) if envelope is not None else None
    held = f" {held_is(held)}" if held else ""
    texts = {
        "invalid_amount": error.message,
        "refund_under_review": error.message,
        "amount_exceeds_unspent": (
            f"That is more than the envelope's unspent balance ({unspent}). Debited money, and "
            f"money already refunded or on its way back, cannot be refunded.{held}"
        ),
        "nothing_to_refund": (
            "Nothing can be refunded: the envelope has no unspent money (or less than a cent on "
            f"each card).{held}"
        ),
        "refund_changed": (
            "Nothing was refunded: the envelope changed since the preview was shown (a debit or "
            "another refund). Check the refund below and confirm again if it is right."
        ),
        "email_unverified": (
            "Nothing was refunded: moving money needs a verified e-mail address. Verify yours "
            "(E-mail, at the top of the page), then try again."
        ),
        "idempotency_key_conflict": (
            "Nothing was refunded: this form was already used for a different refund. Open the "
            "refund form again to make another one."
        ),
        "idempotency_key_other_surface": (
            "Nothing was refunded by this form: its key was used elsewhere. Check the envelope's "
            "refunds, then open the refund form again."
        ),
        "rate_limited": (
            "Nothing was refunded: too many refunds in a short time. Try again in "
            f"{(error.details or {}).get('retry_after_s', 60)} seconds."
        ),
        "invalid_idempotency_key": (
            "Nothing was refunded: the form was incomplete. Open the refund form again."
        ),
    }
    # Any other: its message (for people); its code only in the page's details line.
    return texts.get(error.code, f"Nothing was refunded: {error.message}")


def held_is(note: str) -> str:
    """Turn "$20.00 held: …" into a refusal's sentence: "$20.00 is held: …"."""
    amount, _, rest = note.partition(" held: ")
    return f"{amount} is held: {rest}" if rest else note


def refund_outcome_message(data: dict[str, Any], *, replayed: bool) -> tuple[str, str]:
    """What a person is told after the form's refund (a level and the words), told by what Stripe
    answered: never a success for a refund that moved nothing, a refused part said to be back in
    the envelope. `data` is the refund resource (envelopes.selectors.refund_data); `replayed`: the
    form was sent before, and this is the answer of its first sending (nothing ran twice)."""
    prefix = "This form was sent already; nothing was refunded twice. " if replayed else ""
    status = data.get("status")
    if status == "failed":
        return (
            "error",
            f"{prefix}Nothing was refunded: Stripe refused every part of this refund. The money "
            f"({dollars(data['failed_micro'])}) is back in your envelope; the reason is below.",
        )
    if status == "partially_refunded":
        return (
            "warning",
            f"{prefix}Part of the refund was refused by Stripe: {dollars(data['failed_micro'])} "
            f"is back in your envelope (the reason is below); {dollars(data['refunded_micro'])} "
            "is going back to the cards.",
        )
    if status == "pending" and any(leg.get("queued") for leg in data.get("legs") or []):
        return (
            "info",
            f"{prefix}Your refund is queued: Stripe is taking refunds more slowly than they are "
            "asked for right now. Vouch sends it within moments, in turn (below, on its way); "
            "nothing more is needed from you.",
        )
    if status == "pending":
        return (
            "info",
            f"{prefix}The refund went to Stripe; its answer is not in yet (below, on its way).",
        )
    held = int((data.get("balances") or {}).get("held_micro") or 0)
    return (
        "success",
        f"{prefix}Refund of {dollars(data.get('refunded_micro', 0))} sent: Stripe accepted it; "
        "it is going back to the cards below."
        + (f" {held_is(held_words(held))}: held money is not refunded." if held else ""),
    )


def stored_refund(body: str) -> dict[str, Any] | None:
    """The refund resource kept under the form's key (its first sending's answer), or None when
    what is kept is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "refund_id" in data else None
