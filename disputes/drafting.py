"""Drafting a packet's posture (SPEC §9 step 5). A drafter sees only the admitted material and
returns a draft; whatever it returns goes through `disputes.finalization` before it is kept. The
setting `DISPUTES_DRAFTER` names the drafter class (default: the deterministic rules below)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from disputes.evidence import AdmittedEvidence
from disputes.models import Posture

# The evidence each dispute reason calls for; a tuple of alternatives, each a set of kinds that
# must all be admitted. `general` and any other reason: delivery or consent.
REASON_EVIDENCE: dict[str, tuple[frozenset[str], ...]] = {
    "fraudulent": (frozenset({"consent"}),),
    "unrecognized": (frozenset({"consent"}),),
    "debit_not_authorized": (frozenset({"consent"}),),
    "product_not_received": (frozenset({"delivery"}),),
    "product_unacceptable": (frozenset({"delivery", "communication"}),),
    "credit_not_processed": (frozenset({"policy"}),),
    "subscription_canceled": (frozenset({"policy"}),),
    "duplicate": (frozenset({"other"}),),
}
DEFAULT_EVIDENCE: tuple[frozenset[str], ...] = (frozenset({"delivery"}), frozenset({"consent"}))


def evidence_called_for(reason: str) -> tuple[frozenset[str], ...]:
    return REASON_EVIDENCE.get(reason, DEFAULT_EVIDENCE)


def usd(micro: int) -> str:
    return f"${Decimal(micro) / Decimal(1_000_000):,.2f}"


@dataclass(frozen=True)
class ReceiptFact:
    """One admitted receipt, as a drafter may see it (redacted native detail included)."""

    id: str
    kind: str
    amount_micro: int
    provider_object_id: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class DraftMaterial:
    """Everything a drafter may use: the normalized dispute, the receipt tree as facts, and the
    admitted evidence. Nothing else (no raw provider payloads, no caller-supplied receipts)."""

    dispute: dict[str, Any]  # provider, dispute_id, charge_id, amount_micro, currency, reason, ...
    tree_complete: bool
    tree_problems: list[str]
    undecided_refund_legs: list[str]
    charge_receipt: ReceiptFact | None
    refund_receipts: list[ReceiptFact]  # verified and not reversed
    evidence: list[AdmittedEvidence]
    # SPEC §17: the two prior charges' receipts that qualify a Visa fraud dispute for Compelling
    # Evidence 3.0 (disputes.ce3), empty unless it qualifies: the fact a contest may rest on.
    ce3_priors: list[ReceiptFact] = field(default_factory=list)

    @property
    def refunded_micro(self) -> int:
        return sum(r.amount_micro for r in self.refund_receipts)

    @property
    def receipt_ids(self) -> list[str]:
        head = [self.charge_receipt.id] if self.charge_receipt else []
        return head + [r.id for r in self.refund_receipts] + [r.id for r in self.ce3_priors]


@dataclass
class Draft:
    posture: str
    summary: str
    citations: list[str] = field(default_factory=list)
    open_questions: list[str] = field(default_factory=list)
    # A drafter may propose filing options; a nested idempotency key here must match the key the
    # filer gives, or the filing is refused.
    filing_options: dict[str, Any] = field(default_factory=dict)


class Drafter(Protocol):
    name: str

    def draft(self, material: DraftMaterial) -> Draft | Mapping[str, Any]: ...


class RuleDrafter:
    """The default: SPEC §9's rules in order, the first match winning. Never chooses `accept`."""

    name = "rules"

    def draft(self, material: DraftMaterial) -> Draft:
        dispute = material.dispute
        amount = int(dispute["amount_micro"])
        reason = str(dispute["reason"])
        charge_cite = [material.charge_receipt.id] if material.charge_receipt else []
        if not material.tree_complete or material.undecided_refund_legs:
            questions = [f"Receipt tree: {problem}" for problem in material.tree_problems]
            questions += [
                f"Refund leg {leg} on this charge is not decided yet: wait for its verification."
                for leg in material.undecided_refund_legs
            ]
            return Draft(
                posture=Posture.NEEDS_MORE_EVIDENCE,
                summary=(
                    f"Vouch cannot yet prove the history of charge {dispute['charge_id']}: its "
                    "receipt tree is incomplete, untrusted here, or a refund on it is undecided."
                ),
                citations=[],
                open_questions=questions or ["The receipt tree could not be resolved."],
            )
        refunds = material.refund_receipts
        refund_ids = [r.id for r in refunds]
        if refunds and material.refunded_micro >= amount:
            return Draft(
                posture=Posture.REFUND_ALREADY_SENT,
                summary=(
                    f"Verified refunds of {usd(material.refunded_micro)} on charge "
                    f"{dispute['charge_id']} already cover the disputed {usd(amount)}; the "
                    "cardholder's money was sent back before this dispute."
                ),
                citations=charge_cite + refund_ids,
            )
        if refunds:
            return Draft(
                posture=Posture.OPERATOR_REVIEW,
                summary=(
                    f"Verified refunds of {usd(material.refunded_micro)} cover part of the "
                    f"disputed {usd(amount)} on charge {dispute['charge_id']}; a person must "
                    "decide how to answer for the rest."
                ),
                citations=charge_cite + refund_ids,
                open_questions=[
                    f"{usd(amount - material.refunded_micro)} of the disputed amount is not "
                    "covered by a verified refund: contest it, refund it or accept the dispute?"
                ],
            )
        admitted = {e.kind for e in material.evidence}
        for kinds in evidence_called_for(reason):
            if kinds <= admitted:
                cited = [e.ref for e in material.evidence if e.kind in kinds]
                return Draft(
                    posture=Posture.CONTEST,
                    summary=(
                        f"Charge {dispute['charge_id']} of {usd(amount)} is proven by Vouch's "
                        f"receipt, and the dispute's reason ({reason}) is answered by admitted "
                        f"{' and '.join(sorted(kinds))} evidence."
                    ),
                    citations=charge_cite + cited,
                )
        if material.ce3_priors:
            return Draft(
                posture=Posture.CONTEST,
                summary=(
                    f"Charge {dispute['charge_id']} of {usd(amount)} is proven by Vouch's "
                    f"receipt, and Visa Compelling Evidence 3.0 answers the dispute's reason "
                    f"({reason}): two earlier undisputed charges of the same buyer on the same "
                    "card, shown by Vouch's receipts."
                ),
                citations=charge_cite + [r.id for r in material.ce3_priors],
            )
        wanted = " or ".join(" and ".join(sorted(k)) for k in evidence_called_for(reason))
        return Draft(
            posture=Posture.OPERATOR_REVIEW,
            summary=(
                f"Charge {dispute['charge_id']} of {usd(amount)} is proven by Vouch's receipt, "
                f"but no admitted evidence answers the dispute's reason ({reason})."
            ),
            citations=charge_cite,
            open_questions=[
                f"Missing evidence: {wanted} (the reason `{reason}` calls for it). Admit it, "
                "or decide to accept the dispute."
            ],
        )


def drafter_from_settings() -> Drafter:
    path = settings.DISPUTES_DRAFTER
    drafter: Drafter = import_string(path)()
    return drafter
