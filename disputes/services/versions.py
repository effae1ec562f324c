"""Keeping a drafted packet version: the one way a version of either kind (a response, an appeal)
is saved, superseding the earlier versions of its kind, with its contributors and its audit row.
Preparation, evidence, provider events and appeals all call it."""

from __future__ import annotations

from django.utils import timezone

from core.services import audit_record
from core.transitions import transition
from disputes.models import PACKET_STATUS, Packet, PacketStatus


def _version_save(packet: Packet, trigger: str) -> Packet:
    """Keep a drafted version (in the caller's transaction, under the dispute's lock): earlier
    versions are superseded, its contributors recorded, the preparation audited."""
    dispute = packet.dispute
    # A kind's versions supersede each other: an appeal leaves the filed response as it is.
    older = (
        dispute.packets.select_for_update(of=("self",))
        .filter(kind=packet.kind)
        .exclude(status=PacketStatus.SUPERSEDED)
    )
    for version in older:
        transition(
            version,
            action="packet.supersede",
            machine=PACKET_STATUS,
            to=PacketStatus.SUPERSEDED,
            actor=packet.requested_by,
            also={"updated_at": timezone.now()},
            details={"by": packet.public_id, "by_version": packet.version, "trigger": trigger},
        )
    packet.save()
    contributors = {e.admitted_by_id for e in dispute.evidence.all() if e.admitted_by_id}
    if packet.requested_by_id is not None:
        contributors.add(packet.requested_by_id)
    if contributors:
        packet.contributors.add(*contributors)
    audit_record(
        actor=packet.requested_by,
        action="packet.prepare",
        target_type="packet",
        target_id=packet.public_id,
        details={
            "version": packet.version,
            "posture": packet.posture,
            "digest": packet.digest,
            "trigger": trigger,
        },
    )
    return packet
