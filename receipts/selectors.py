"""Reads of receipts: verify one receipt now, and the receipt tree of a charge (SPEC §8, §9).

A receipt is verified against THIS deployment's configuration every time it is read: its stored
canonical text must be the canonical form of its body and hash to its id, its columns must say
what its body says, its signature must verify with a configured trusted key of this deployment's
environment, it must carry redacted native detail, and the provider's `livemode` it records must
be this deployment's (live objects in production, test-mode ones anywhere else)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.keys import TrustCode, deployment_livemode, signature_verify
from receipts.models import Receipt, ReceiptKind

DETAIL_MISSING = "detail_missing"
LIVEMODE_MISSING = "livemode_missing"
LIVEMODE_MISMATCH = "livemode_mismatch"
DIGEST_MISMATCH = TrustCode.DIGEST_MISMATCH.value


@dataclass(frozen=True)
class ReceiptCheck:
    """One receipt, verified now."""

    receipt: Receipt
    # digest matches, signature verifies against a trusted key, detail present, livemode the
    # deployment's
    ok: bool
    # None or one code: digest_mismatch, bad_signature, unknown_key, environment_mismatch,
    # local_development_key, detail_missing, livemode_missing, livemode_mismatch
    problem: str | None


@dataclass(frozen=True)
class ReceiptTree:
    """A charge receipt with its refund receipts, and what is known of the refund legs on the
    charge that have no receipt. Undecided legs include accepted legs whose verdict is
    UNVERIFIABLE or a contradiction other than a reversal: whether money moved is for a person
    to decide, so the tree cannot be complete."""

    charge_id: str
    charge: ReceiptCheck | None  # None: no charge receipt (yet)
    refunds: list[ReceiptCheck]  # refund receipts whose parent is the charge receipt
    reversed_refund_ids: frozenset[str]  # ids of refund receipts that have a refund_reversal
    # public ids of refund legs on this charge whose outcome is reserved/unknown, or accepted with
    # the verification run not yet decided (or decided without settling whether money moved)
    undecided_refund_legs: list[str]
    # accepted legs whose run is VERIFIED but with no refund receipt, or released (reversed) with
    # no refund_reversal receipt
    missing_refund_receipts: list[str]
    reversals: list[ReceiptCheck] = field(default_factory=list)  # the refund_reversal receipts

    @property
    def complete(self) -> bool:
        """Charge present, every receipt's check ok, no receipt missing, no leg undecided."""
        return not self.problems

    @property
    def problems(self) -> list[str]:
        found: list[str] = []
        if self.charge is None:
            found.append("charge_receipt_missing")
        for check in self.checks():
            if not check.ok:
                found.append(f"{check.receipt.id}: {check.problem}")
        found += [f"refund_receipt_missing: {leg}" for leg in self.missing_refund_receipts]
        found += [f"refund_leg_undecided: {leg}" for leg in self.undecided_refund_legs]
        return found

    def checks(self) -> list[ReceiptCheck]:
        return [*([self.charge] if self.charge else []), *self.refunds, *self.reversals]

    def unreversed_refunds(self) -> list[ReceiptCheck]:
        """Verified refunds (their receipt checks ok) that no reversal undid."""
        return [
            check
            for check in self.refunds
            if check.ok and check.receipt.id not in self.reversed_refund_ids
        ]

    def unreversed_refunded_micro(self) -> int:
        return sum(check.receipt.amount_micro for check in self.unreversed_refunds())

    def receipt_ids(self) -> list[str]:
        return [check.receipt.id for check in self.checks()]


def _columns_match(receipt: Receipt, body: dict[str, Any]) -> bool:
    """The row's columns say what the signed body says (what readers use without the body)."""
    verification = body.get("verification") or {}
    return (
        body.get("kind") == receipt.kind
        and body.get("provider") == receipt.provider
        and body.get("provider_object_id") == receipt.provider_object_id
        and body.get("charge_id") == receipt.charge_id
        and body.get("amount_micro") == receipt.amount_micro
        and body.get("currency") == receipt.currency
        and body.get("parent") == receipt.parent_id
        and verification.get("run") == receipt.verification_run.public_id
        and verification.get("verdict") == receipt.verdict
    )


def recorded_livemode(receipt: Receipt) -> bool | None:
    """The provider's `livemode` a receipt records, or None if it records none.

    From body version 2 it is the body's own field. A version-1 body (written before the field
    existed) has only its native detail's, which the allow-list kept from a charge; a Stripe
    refund carries none, and a refund is in the mode of the charge it refunds, so a version-1
    refund or reversal takes its parent's. The parent is bound by content: the signed body names
    its id, the SHA-256 of its canonical body, so its mode is used only if that still holds."""
    body = receipt.body if isinstance(receipt.body, dict) else {}
    version = body.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version >= 2:
        mode = body.get("livemode")
    else:
        detail = body.get("detail")
        mode = detail.get("livemode") if isinstance(detail, dict) else None
        parent = receipt.parent
        if mode is None and parent is not None and _addressed_by_content(parent):
            return recorded_livemode(parent)
    return mode if isinstance(mode, bool) else None


def _addressed_by_content(receipt: Receipt) -> bool:
    body = receipt.body if isinstance(receipt.body, dict) else {}
    try:
        canonical = canonical_bytes(body)
    except Exception:  # a body that has no canonical form was not written by us
        return False
    return canonical == receipt.canonical.encode("utf-8") and receipt_id_of(canonical) == receipt.id


def receipt_verify(receipt: Receipt) -> ReceiptCheck:
    """Verify one receipt now, against this deployment's trusted keys."""
    canonical = receipt.canonical.encode("utf-8")
    body = receipt.body if isinstance(receipt.body, dict) else {}
    if not (_addressed_by_content(receipt) and _columns_match(receipt, body)):
        return ReceiptCheck(receipt, False, DIGEST_MISMATCH)
    trust = signature_verify(message=canonical, signature=receipt.signature, key_id=receipt.key_id)
    if not trust.ok:
        return ReceiptCheck(receipt, False, trust.code.value)
    detail = body.get("detail")
    if not isinstance(detail, dict) or detail.get("id") != receipt.provider_object_id:
        return ReceiptCheck(receipt, False, DETAIL_MISSING)
    livemode = recorded_livemode(receipt)
    if livemode is None:
        return ReceiptCheck(receipt, False, LIVEMODE_MISSING)
    native = detail.get("livemode")
    if livemode != deployment_livemode() or (isinstance(native, bool) and native != livemode):
        return ReceiptCheck(receipt, False, LIVEMODE_MISMATCH)
    return ReceiptCheck(receipt, True, None)


def receipts_for_charge(*, charge_id: str) -> list[Receipt]:
    """Every receipt of a charge (the charge's, its refunds', their reversals'), oldest first."""
    return list(
        Receipt.objects.select_related("verification_run", "parent")
        .filter(charge_id=charge_id)
        .order_by("occurred_at", "created_at", "id")
    )


def receipt_get(*, receipt_id: str) -> Receipt | None:
    return Receipt.objects.select_related("verification_run").filter(id=receipt_id).first()


def receipt_tree(*, charge_id: str) -> ReceiptTree:
    """The charge's receipt tree, every receipt verified now, with the refund legs on the charge
    that are undecided or whose receipt is missing."""
    from envelopes.models import LegOutcome, RefundLeg
    from verification.contracts import Verdict

    receipts = receipts_for_charge(charge_id=charge_id)
    charge = next(
        (r for r in receipts if r.kind == ReceiptKind.CHARGE and r.provider_object_id == charge_id),
        None,
    )
    refunds = [
        r
        for r in receipts
        if r.kind == ReceiptKind.REFUND and charge is not None and r.parent_id == charge.id
    ]
    refund_ids = {r.id for r in refunds}
    reversals = [
        r for r in receipts if r.kind == ReceiptKind.REFUND_REVERSAL and r.parent_id in refund_ids
    ]
    reversed_ids = frozenset(str(r.parent_id) for r in reversals)
    refund_by_object = {r.provider_object_id: r for r in refunds}
    reversed_objects = {r.provider_object_id for r in reversals}

    undecided: list[str] = []
    missing: list[str] = []
    legs = (
        RefundLeg.objects.select_related("verification_run")
        .filter(funding_leg__charge_id=charge_id)
        .order_by("id")
    )
    for leg in legs:
        if leg.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN):
            undecided.append(leg.public_id)
            continue
        if leg.outcome != LegOutcome.ACCEPTED:
            continue  # refused: the provider did nothing
        run = leg.verification_run
        verdict = run.verdict if run is not None else Verdict.PENDING
        if verdict == Verdict.VERIFIED:
            receipt = refund_by_object.get(leg.provider_refund_id)
            if receipt is None or (leg.released and leg.provider_refund_id not in reversed_objects):
                missing.append(leg.public_id)
        elif leg.released:
            continue  # FAILED or canceled: the money came back, nothing was sent
        else:  # PENDING, UNVERIFIABLE, or a contradiction that is not a reversal
            undecided.append(leg.public_id)

    return ReceiptTree(
        charge_id=charge_id,
        charge=receipt_verify(charge) if charge is not None else None,
        refunds=[receipt_verify(r) for r in refunds],
        reversed_refund_ids=reversed_ids,
        undecided_refund_legs=undecided,
        missing_refund_receipts=missing,
        reversals=[receipt_verify(r) for r in reversals],
    )
