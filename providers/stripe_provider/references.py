"""A refund's reference at the card network, read from a Stripe Refund: the one place Vouch reads
`destination_details.card` (SDK `Refund.DestinationDetails.Card`: `reference`, `reference_status`
`pending`/`available`/`unavailable`, `reference_type`, e.g. `acquirer_reference_number`). The
acquirer reference number (ARN) is what a buyer's bank needs to trace a refund
(https://docs.stripe.com/api/refunds/object#refund_object-destination_details-card-reference)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REFERENCE_STATUSES = ("pending", "available", "unavailable")


@dataclass(frozen=True)
class RefundReference:
    """What Stripe shows of a card refund's reference: `status` one of REFERENCE_STATUSES;
    `reference` only when available; `type` as Stripe names it (empty when it names none)."""

    status: str
    reference: str
    type: str

    @property
    def settled(self) -> bool:
        """Stripe will not change it any more: the reference is there, or will never be."""
        return self.status in ("available", "unavailable")


# What the refund leg's columns hold (envelopes.models.RefundLeg.refund_reference, _type).
REFERENCE_MAX = 100
TYPE_MAX = 40


def refund_reference_of(refund: Mapping[str, Any]) -> RefundReference | None:
    """The card refund's reference as the Refund shows it; None when the refund carries no card
    details, a status Stripe does not document, or a reference longer than Vouch keeps (nothing to
    record, nothing to wait for; a reference is never cut)."""
    details = refund.get("destination_details")
    card = details.get("card") if isinstance(details, Mapping) else None
    if not isinstance(card, Mapping):
        return None
    status = card.get("reference_status")
    if status not in REFERENCE_STATUSES:
        return None
    reference = card.get("reference")
    kind = card.get("reference_type")
    reference = reference if isinstance(reference, str) and status == "available" else ""
    if len(reference) > REFERENCE_MAX:
        return None  # never cut: a cut reference is a wrong one at the buyer's bank
    if status == "available" and not reference:
        status = "pending"  # said available with nothing in it: not yet usable, ask again
    return RefundReference(
        status=str(status),
        reference=reference,
        type=kind if isinstance(kind, str) and len(kind) <= TYPE_MAX else "",
    )
