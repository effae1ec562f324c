"""Visa Compelling Evidence 3.0 (SPEC §17), computed from Vouch's own signed receipts only.

A Visa fraud dispute (reason 10.4, card not present) can be answered with two prior undisputed
transactions on the same card, 120 to 365 days before the disputed one, each sharing at least two
data elements with it — customer account id, IP address, device id, shipping address — one of the
two being the IP address or the device id. Vouch ships nothing: its elements are the account, the
IP address and the device, which every funding charge sends as PaymentIntent metadata and its
signed charge receipt keeps, with the card's fingerprint (the card's identity, not its number):
docs/decisions/0012-ce3-data-elements-in-receipts.md.

`ce3_qualification` reads only charge receipts whose check is ok (digest, trusted key of this
deployment: receipts.selectors.receipt_verify) and the Dispute table (which prior charges were
disputed). A receipt that fails its check is not read at all. The result is never `qualified`
unless two priors qualify from trusted receipts; `ce3_evidence` turns a qualified result into
Stripe's `evidence.enhanced_evidence.visa_compelling_evidence_3`, with only the elements the
receipts hold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q

from disputes.models import Dispute
from receipts.models import Receipt, ReceiptKind
from receipts.selectors import receipt_verify, receipts_for_charge

PROGRAM = "visa_compelling_evidence_3"
MIN_AGE_DAYS = 120
MAX_AGE_DAYS = 365
PRIORS_NEEDED = 2
ELEMENTS_NEEDED = 2

ACCOUNT = "customer_account_id"
DEVICE = "customer_device_id"
IP = "customer_purchase_ip"
# Stripe's name of each data element -> the metadata key a funding sends it under.
ELEMENT_KEYS: Mapping[str, str] = {
    ACCOUNT: "vouch_account",
    DEVICE: "vouch_device",
    IP: "vouch_ip",
}
# At least one of the shared elements must be one of these (Visa's rule).
STRONG_ELEMENTS = frozenset({IP, DEVICE})
PRODUCT_DESCRIPTION = "Escrow envelope funding (Vouch)"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # a receipt body's `time` (receipts.services.iso_utc)

QUALIFIED = "qualified"
NOT_QUALIFIED = "not_qualified"
NOT_ELIGIBLE = "not_eligible"
NO_RECEIPT = "no_receipt"

# Why a candidate is not a prior, in the order they are checked.
OTHER_CARD = "other_card"
OTHER_ACCOUNT = "other_account"
DISPUTED = "disputed"
TOO_RECENT = "too_recent"
TOO_OLD = "too_old"
TOO_FEW_ELEMENTS = "too_few_elements"
NEEDS_IP_OR_DEVICE = "needs_ip_or_device"
NOT_CHOSEN = "not_chosen"  # it qualifies, but two better ones were chosen


@dataclass(frozen=True)
class ReceiptCharge:
    """One trusted charge receipt, as CE 3.0 reads it."""

    receipt_id: str
    charge: str
    occurred_at: datetime
    fingerprint: str | None
    elements: Mapping[str, str]  # Stripe's element name -> value; absent ones omitted
    disputed: bool  # the provider's own `disputed` when the charge was read back

    def as_dict(self) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "charge": self.charge,
            "occurred_at": self.occurred_at.strftime(TIME_FORMAT),
        }


@dataclass(frozen=True)
class Candidate:
    """Another charge receipt of the same card or account: a prior, or why it is not one."""

    receipt: ReceiptCharge
    age_days: int
    matched: tuple[str, ...]  # the elements present and equal in both, sorted
    rejected: str | None  # None: it qualifies

    def as_dict(self) -> dict[str, Any]:
        shown = {**self.receipt.as_dict(), "age_days": self.age_days, "matched": list(self.matched)}
        return shown if self.rejected is None else {**shown, "reason": self.rejected}


@dataclass(frozen=True)
class Ce3Result:
    status: str  # qualified, not_qualified, not_eligible, no_receipt
    disputed: ReceiptCharge | None
    # The qualifying priors chosen, at most two: two when qualified, fewer when not.
    priors: tuple[Candidate, ...]
    considered: tuple[Candidate, ...]  # every other candidate, with why it is not a prior
    reasons: tuple[str, ...]  # why not qualified (empty when qualified)

    @property
    def receipt_ids(self) -> list[str]:
        """The receipts the qualification rests on: the disputed charge's, then the priors'."""
        ids = [self.disputed.receipt_id] if self.disputed is not None else []
        return ids + [prior.receipt.receipt_id for prior in self.priors]

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe and deterministic (a packet binds it into its digest)."""
        disputed = None
        if self.disputed is not None:
            disputed = {**self.disputed.as_dict(), "elements": _elements(self.disputed)}
        return {
            "status": self.status,
            "disputed": disputed,
            "priors": [prior.as_dict() for prior in self.priors],
            "considered": [candidate.as_dict() for candidate in self.considered],
            "reasons": list(self.reasons),
        }


def _elements(receipt: ReceiptCharge) -> dict[str, str]:
    return dict(sorted(receipt.elements.items()))


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _read(receipt: Receipt) -> ReceiptCharge | None:
    """A charge receipt whose check is ok, read; None for any other receipt."""
    if receipt.kind != ReceiptKind.CHARGE or not receipt_verify(receipt).ok:
        return None
    body = receipt.body
    detail = body["detail"]  # receipt_verify: a dict naming the charge
    try:
        occurred_at = datetime.strptime(body["time"], TIME_FORMAT).replace(tzinfo=UTC)
    except (KeyError, TypeError, ValueError):
        return None  # not a body Vouch writes, though signed by its key: not read
    metadata = _object(detail.get("metadata"))
    card = _object(_object(detail.get("payment_method_details")).get("card"))
    return ReceiptCharge(
        receipt_id=receipt.id,
        charge=receipt.provider_object_id,
        occurred_at=occurred_at,
        fingerprint=_text(card.get("fingerprint")),
        elements={
            name: text
            for name, key in ELEMENT_KEYS.items()
            if (text := _text(metadata.get(key))) is not None
        },
        disputed=detail.get("disputed") is True,
    )


def _disputed_receipt(charge_id: str) -> ReceiptCharge | None:
    # A charge receipt's charge id is its own object's (receipts.services.receipt_for_run).
    for receipt in receipts_for_charge(charge_id=charge_id):
        if receipt.kind == ReceiptKind.CHARGE:
            return _read(receipt)
    return None


def _same_card_or_account(disputed: ReceiptCharge) -> list[ReceiptCharge]:
    """The other trusted charge receipts of the disputed one's card or account: one query on the
    signed bodies (JSON key lookups), not a scan of every receipt in Python."""
    where = Q(pk__in=[])
    account = disputed.elements.get(ACCOUNT)
    if account is not None:
        where |= Q(**{f"body__detail__metadata__{ELEMENT_KEYS[ACCOUNT]}": account})
    if disputed.fingerprint is not None:
        where |= Q(body__detail__payment_method_details__card__fingerprint=disputed.fingerprint)
    receipts = (
        Receipt.objects.select_related("verification_run", "parent")
        .filter(where, kind=ReceiptKind.CHARGE)
        .exclude(pk=disputed.receipt_id)
        .order_by("occurred_at", "id")
    )
    return [read for read in map(_read, receipts) if read is not None]


def _matched(disputed: ReceiptCharge, other: ReceiptCharge) -> tuple[str, ...]:
    return tuple(
        sorted(
            name for name, value in disputed.elements.items() if other.elements.get(name) == value
        )
    )


def elements_rule(matched: tuple[str, ...]) -> str | None:
    """Visa's rule on the shared data elements: at least two, one of them the IP address or the
    device id. None when it holds, else why not."""
    if len(matched) < ELEMENTS_NEEDED:
        return TOO_FEW_ELEMENTS
    if not STRONG_ELEMENTS.intersection(matched):
        return NEEDS_IP_OR_DEVICE
    return None


def _judge(disputed: ReceiptCharge, other: ReceiptCharge, disputed_charges: set[str]) -> Candidate:
    age_days = (disputed.occurred_at - other.occurred_at) // timedelta(days=1)
    matched = _matched(disputed, other)
    account = disputed.elements.get(ACCOUNT)
    if disputed.fingerprint is None or other.fingerprint != disputed.fingerprint:
        rejected: str | None = OTHER_CARD
    elif account is None or other.elements.get(ACCOUNT) != account:
        rejected = OTHER_ACCOUNT
    elif other.disputed or other.charge in disputed_charges:
        rejected = DISPUTED
    elif age_days < MIN_AGE_DAYS:
        rejected = TOO_RECENT
    elif age_days > MAX_AGE_DAYS:
        rejected = TOO_OLD
    else:
        rejected = elements_rule(matched)
    return Candidate(other, age_days, matched, rejected)


def _preference(candidate: Candidate) -> tuple[int, float, str]:
    """The most elements shared, then the most recent, then the receipt id."""
    receipt = candidate.receipt
    return (-len(candidate.matched), -receipt.occurred_at.timestamp(), receipt.receipt_id)


def ce3_qualification(*, dispute: Dispute) -> Ce3Result:
    """Whether the dispute qualifies for Visa Compelling Evidence 3.0 by Vouch's own trusted
    charge receipts, with the two priors chosen (most elements shared, then most recent, then
    receipt id) and every other candidate with why it is not one. Reads receipts and disputes
    only; calls no provider."""
    eligible = dispute.enhanced_eligibility_types
    if not (isinstance(eligible, list) and PROGRAM in eligible):
        return Ce3Result(
            NOT_ELIGIBLE, None, (), (), (f"the provider does not report {PROGRAM} eligibility",)
        )
    disputed = _disputed_receipt(dispute.charge_id)
    if disputed is None:
        return Ce3Result(
            NO_RECEIPT, None, (), (), (f"no trusted charge receipt for {dispute.charge_id}",)
        )
    others = _same_card_or_account(disputed)
    disputed_charges = set(
        Dispute.objects.filter(charge_id__in=[other.charge for other in others]).values_list(
            "charge_id", flat=True
        )
    )
    judged = [_judge(disputed, other, disputed_charges) for other in others]
    qualifying = sorted((c for c in judged if c.rejected is None), key=_preference)
    chosen = tuple(qualifying[:PRIORS_NEEDED])
    considered = tuple(
        c if c.rejected is not None else Candidate(c.receipt, c.age_days, c.matched, NOT_CHOSEN)
        for c in judged
        if c not in chosen
    )
    reasons: list[str] = []
    if disputed.fingerprint is None:
        reasons.append("the disputed charge's receipt records no card fingerprint")
    if ACCOUNT not in disputed.elements:
        reasons.append("the disputed charge's receipt records no customer account")
    if not STRONG_ELEMENTS.intersection(disputed.elements):
        reasons.append("the disputed charge's receipt records neither an IP address nor a device")
    if len(chosen) < PRIORS_NEEDED:
        reasons.append(f"{len(chosen)} qualifying prior charges, {PRIORS_NEEDED} needed")
        return Ce3Result(NOT_QUALIFIED, disputed, chosen, considered, tuple(reasons))
    return Ce3Result(QUALIFIED, disputed, chosen, considered, ())


def ce3_evidence(result: Ce3Result) -> dict[str, Any] | None:
    """Stripe's `evidence.enhanced_evidence.visa_compelling_evidence_3` for a qualified result:
    the elements the receipts hold and nothing else. None when not qualified."""
    if result.status != QUALIFIED or result.disputed is None:
        return None
    return {
        "disputed_transaction": {
            **_elements(result.disputed),
            "merchandise_or_services": "services",
            "product_description": PRODUCT_DESCRIPTION,
        },
        "prior_undisputed_transactions": [
            {
                "charge": prior.receipt.charge,
                **_elements(prior.receipt),
                "product_description": PRODUCT_DESCRIPTION,
            }
            for prior in result.priors
        ],
    }
