"""Four eyes (SPEC §5): a person who did not contribute to a version approves the content shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from core.exceptions import PermissionDenied
from core.transitions import transition
from disputes import exceptions as errors
from disputes.models import (
    PACKET_APPROVAL,
    ApprovalStatus,
    FilingStatus,
    Packet,
)
from disputes.packets import fee_acknowledgement_needed
from disputes.services import checks

if TYPE_CHECKING:
    from accounts.models import User

PERM_APPROVE = "disputes.approve_packet"


def packet_approve(
    *, packet: Packet, actor: User, confirmed_digest: str, fee_acknowledged: bool = False
) -> Packet:
    """Four eyes: a person with `disputes.approve_packet` who did not contribute to this version
    approves the content it shows them; the approval records who, when and the digest. Refused
    for a dispute the card network allows no response to (`dispute_response_not_allowed`). A packet
    over the provider's limits (text, one field, files) is refused (`packet_over_limit`). A
    response filed to a Visa or Mastercard compliance dispute needs the approver's acknowledgement
    of that network's fee (`fee_not_acknowledged`), bound into the approval with the digest
    (SPEC §17)."""
    if not actor.has_perm(PERM_APPROVE):
        raise PermissionDenied(f"This needs the permission {PERM_APPROVE}.")
    with transaction.atomic():
        locked = checks.lock_packet(packet)
        checks.refuse_superseded(locked)
        if locked.filing_status != FilingStatus.NOT_FILED:
            raise checks.filing_refusal(locked)
        checks.refuse_if_no_response_allowed(locked.dispute)
        checks.check_confirmed(locked, confirmed_digest)
        checks.check_fileable_content(locked)
        checks.check_budget(locked)
        if locked.contributors.filter(pk=actor.pk).exists():
            raise errors.ApproverIsContributor()
        needed = fee_acknowledgement_needed(locked)
        if needed and not fee_acknowledged:
            raise errors.FeeNotAcknowledged(details={"fee": (locked.costs or {}).get("fees")})
        now = timezone.now()
        transition(
            locked,
            action="packet.approve",
            machine=PACKET_APPROVAL,
            to=ApprovalStatus.APPROVED,
            actor=actor,
            also={
                "approved_by": actor,
                "approved_at": now,
                "approved_digest": locked.digest,
                "fee_acknowledged": needed,
                "updated_at": now,
            },
            details={"digest": locked.digest, "version": locked.version}
            | ({"fee_acknowledged": True} if needed else {}),
        )
    return locked


def filing_key_proposal(packet: Packet) -> str:
    """The key the File form proposes: stable for a packet and its approved digest."""
    return f"{packet.public_id}:{(packet.approved_digest or packet.digest)[:16]}"
