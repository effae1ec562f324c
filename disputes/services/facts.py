"""The facts an approved response rests on, read again at filing (SPEC §18): the dispute (on the
packet's charge, of its amount) and each refund it cites at the provider, and in the ledger and
the receipts what was bound at approval (cited refunds still standing, no new refund, the receipt
tree still complete). A fact that changed voids the approval: the packet is prepared again and
needs a new approval; nothing is sent. Split from `disputes.services.filing` (STYLE rule 16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from core.services import audit_record
from disputes import exceptions as errors
from disputes.models import (
    ApprovalStatus,
    Dispute,
    FilingStatus,
    Packet,
    PacketKind,
    PacketStatus,
    Posture,
)
from disputes.packets import (
    ADJUSTMENT_PREFIX,
)
from disputes.services import checks
from disputes.services.disputes import dispute_normalize
from disputes.services.preparation import _version_draft, material_for
from disputes.services.versions import _version_save
from envelopes.models import Adjustment, RefundLeg
from envelopes.services import foreign_refund_release, refund_leg_release
from providers import provider_from_settings
from receipts.models import Receipt, ReceiptKind

if TYPE_CHECKING:
    from accounts.models import User


# Stripe's refund statuses that say no money reached the cardholder.
REFUND_UNDONE = ("failed", "canceled")


def _fact(fact: str, message: str) -> dict[str, str]:
    return {"fact": fact, "message": message}


def _cited_refunds(packet: Packet) -> list[tuple[str, str]]:
    """(citation, provider refund id) of each refund a response cites: refund receipts, and
    refunds recorded by four-eyes adjustment."""
    cited = [str(c) for c in packet.citations]
    found = dict(
        Receipt.objects.filter(id__in=cited, kind=ReceiptKind.REFUND).values_list(
            "id", "provider_object_id"
        )
    )
    found |= dict(
        Adjustment.objects.filter(public_id__in=cited).values_list(
            "public_id", "provider_object_id"
        )
    )
    return [(c, found[c]) for c in cited if found.get(c)]


def provider_facts(packet: Packet) -> list[dict[str, str]]:
    """The facts an approved response rests on, as the provider shows them now (SPEC §18): one
    `dispute.read` (the dispute on the charge, and of the amount, the packet answers for) and one
    `refund.read` of each refund it cites (not failed or canceled since). Called before anything
    is reserved, outside any transaction. Nothing is read for a packet that is not a new filing of
    an approved response (its refusal comes from the reservation). A read without an answer is
    refused: nothing is sent on a guess (`dispute_read_unavailable`)."""
    if (
        packet.kind != PacketKind.RESPONSE
        or packet.filing_status != FilingStatus.NOT_FILED
        or packet.approval_status != ApprovalStatus.APPROVED
    ):
        return []
    provider = provider_from_settings()
    dispute = packet.dispute
    read = provider.dispute_read(dispute.provider_dispute_id)
    if not read.accepted:
        raise errors.DisputeReadUnavailable(
            "The provider's dispute could not be read to check the facts this packet rests on: "
            "nothing was sent. Try again.",
            details={"read": read.error_code or "unknown", "request_id": read.request_id},
        )
    shown = dispute_normalize(read.require())
    changes = []
    if shown["charge_id"] != dispute.charge_id:
        changes.append(
            _fact(
                "charge",
                f"The provider shows dispute {dispute.provider_dispute_id} on charge "
                f"{shown['charge_id']}, not on {dispute.charge_id} the packet answers for.",
            )
        )
    if (shown["amount_micro"], shown["currency"]) != (dispute.amount_micro, dispute.currency):
        changes.append(
            _fact(
                "amount",
                f"The provider shows the dispute of {shown['amount_micro']} micro "
                f"{shown['currency']}, not {dispute.amount_micro} micro {dispute.currency}.",
            )
        )
    for citation, refund_id in _cited_refunds(packet):
        refund = provider.refund_read(refund_id)
        if not refund.accepted:
            raise errors.DisputeReadUnavailable(
                f"The refund {refund_id} the packet cites could not be read from the provider: "
                "nothing was sent. Try again.",
                details={"refund": refund_id, "read": refund.error_code or "unknown"},
            )
        status = str(refund.require().get("status") or "")
        if status in REFUND_UNDONE:
            # The money is back in the envelope (the one release service, as the webhook would
            # have done), so the version prepared again no longer counts it as refunded.
            _release_undone(refund.require(), refund_id)
            changes.append(
                _fact(
                    "refund",
                    f"The provider shows the refund {refund_id} ({citation}) {status}: the money "
                    "did not reach the cardholder.",
                )
            )
    return changes


def _release_undone(refund: dict[str, Any], refund_id: str) -> None:
    """A cited refund the provider shows failed or canceled: released once, through the one
    release service (a refund leg's, or a recorded foreign refund's); a no-op when released."""
    leg = RefundLeg.objects.filter(provider_refund_id=refund_id).first()
    if leg is not None:
        refund_leg_release(
            leg=leg, reason=f"provider reports {refund.get('status')}", provider_refund=refund
        )
    else:
        foreign_refund_release(provider_refund=refund, source="dispute filing facts")


def ledger_facts(packet: Packet) -> list[dict[str, str]]:
    """The facts an approved response rests on, as Vouch's ledger and receipts show them now
    (SPEC §18), against what its approval bound (`receipt_ids`, the material it was prepared
    from): every receipt and recorded refund it rested on still stands (trusted, not reversed or
    given back), no refund was recorded on the charge since, and no refund on it is undecided.
    Reads only; called under the packet's lock."""
    if packet.kind != PacketKind.RESPONSE:
        return []
    material = material_for(packet.dispute)
    then, now = set(packet.receipt_ids), set(material.receipt_ids)
    objects = dict(
        Receipt.objects.filter(id__in=then | now).values_list("id", "provider_object_id")
    ) | dict(
        Adjustment.objects.filter(public_id__in=then | now).values_list(
            "public_id", "provider_object_id"
        )
    )
    refunds = (
        {r.id for r in material.refund_receipts}
        | set(
            Receipt.objects.filter(id__in=then, kind=ReceiptKind.REFUND).values_list(
                "id", flat=True
            )
        )
        | {c for c in then if c.startswith(ADJUSTMENT_PREFIX)}
    )
    changes = []
    for gone in sorted(then - now):
        if gone in refunds:
            changes.append(
                _fact(
                    "refund",
                    f"The refund {objects.get(gone, '?')} ({gone}) no longer stands: it failed, "
                    "was reversed or was given back since the approval.",
                )
            )
        else:
            changes.append(
                _fact("receipts", f"The receipt {gone} is no longer trusted or present.")
            )
    for new in sorted(now - then):
        if new in refunds:
            changes.append(
                _fact(
                    "new_refund",
                    f"A refund {objects.get(new, '?')} ({new}) was recorded on charge "
                    f"{packet.dispute.charge_id} since the approval.",
                )
            )
        else:
            changes.append(_fact("receipts", f"The receipt {new} was written since the approval."))
    if packet.posture != Posture.NEEDS_MORE_EVIDENCE and (
        not material.tree_complete or material.undecided_refund_legs
    ):
        problems = list(material.tree_problems) + [
            f"refund_leg_undecided: {leg}" for leg in material.undecided_refund_legs
        ]
        changes.append(
            _fact(
                "receipts",
                "The charge's receipt tree is no longer complete: " + "; ".join(problems) + ".",
            )
        )
    return changes


def _facts_void(packet: Packet, *, actor: User, changes: list[dict[str, str]]) -> Exception:
    """A fact the approved packet rests on changed: the approval is void. Under the dispute's
    lock, the packet (still the current, unfiled version) is superseded by a new version prepared
    from the facts as they are now (nobody asked for it: no contributor), which needs its own
    approval; the person filing is told what changed. Nothing is sent. Returns the refusal."""
    new: Packet | None = None
    with transaction.atomic():
        locked_dispute = Dispute.objects.select_for_update().get(pk=packet.dispute_id)
        locked = checks.lock_packet(packet)
        if (
            locked.status != PacketStatus.SUPERSEDED
            and locked.filing_status == FilingStatus.NOT_FILED
        ):
            new = _version_save(_version_draft(locked_dispute, requested_by=None), "facts_changed")
            audit_record(
                actor=actor,
                action="packet.facts_changed",
                target_type="packet",
                target_id=locked.public_id,
                details={
                    "changed": changes,
                    "approved_digest": locked.approved_digest,
                    "new_version": new.public_id,
                },
            )
    said = " ".join(c["message"] for c in changes)
    version = f" as version {new.version}" if new is not None else ""
    return errors.PacketFactsChanged(
        f"A fact this packet rests on changed since it was approved: {said} It was prepared "
        f"again{version}, which needs a new approval. Nothing was sent to the provider.",
        details={"changed": changes, "new_version": new.public_id if new is not None else None},
    )
