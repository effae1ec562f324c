"""A refund leg's reference at the card network (its ARN) as the buyer, the API and the MCP tools
show it, with one sentence on what to do with it (issue 41 item 9)."""

from __future__ import annotations

from typing import Any

from envelopes.models import ReferenceStatus, RefundLeg

# What a buyer does with the reference, by where it stands: the same words on every surface.
HOW_TO_USE: dict[str, str] = {
    ReferenceStatus.AVAILABLE: "Give your bank this reference (ARN) if the refund has not reached "
    "your statement after 10 business days: it lets them find the refund.",
    ReferenceStatus.PENDING: "The card network has not given this refund its reference (ARN) yet; "
    "it usually comes within a few days, and it will show here.",
    ReferenceStatus.UNAVAILABLE: "The card network gave no reference (ARN) for this refund. If it "
    "has not reached your statement after 10 business days, contact us and we will trace it.",
    ReferenceStatus.NOT_AVAILABLE: "No reference (ARN) came for this refund within three weeks: "
    "not available. If it has not reached your statement, contact us and we will trace it.",
}


def refund_reference_data(leg: RefundLeg) -> dict[str, Any] | None:
    """`{status, reference, reference_type, how_to_use}`; None until a verified readback of the
    leg's refund showed where its reference stands."""
    status = leg.refund_reference_status
    if not status:
        return None
    return {
        "status": status,
        "reference": leg.refund_reference or None,
        "reference_type": leg.refund_reference_type or None,
        "how_to_use": HOW_TO_USE[status],
    }
