"""The readback's verdict on a filing: the only way a packet becomes `filed`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from core.services import audit_record
from disputes.models import (
    FilingStatus,
    Packet,
    PacketStatus,
)
from disputes.services.checks import (
    _UNDERWAY,
    _nothing_submitted,
    _readback_shows,
)

if TYPE_CHECKING:
    from verification.models import VerificationRun


def packet_on_verdict(*, run: VerificationRun) -> None:
    """The readback decided: VERIFIED makes the packet `filed`. Any other verdict leaves it not
    filed (the engine escalates it to a person): `not_submitted` when the readback shows nothing
    submitted (the dispute is free for a new version), else `readback_failed` (it stays held)."""
    with transaction.atomic():
        packet = Packet.objects.select_for_update(of=("self",)).filter(filing_run_id=run.pk).first()
        if packet is None or packet.filing_status not in _UNDERWAY:
            return
        if run.verdict == "VERIFIED":
            packet.filing_status = FilingStatus.FILED
            packet.status = PacketStatus.FILED  # what every page and the API say of it now
            packet.filed_at = timezone.now()
        elif run.verdict != "PENDING":
            # Not proven. If the readback shows nothing submitted, this filing did not happen and
            # the dispute is free for a new approved version; otherwise something was submitted
            # that is not shown to be this packet, and the dispute stays held for a person.
            packet.filing_status = (
                FilingStatus.NOT_SUBMITTED
                if _nothing_submitted(_readback_shows(packet))
                else FilingStatus.READBACK_FAILED
            )
        else:
            return
        packet.save(update_fields=["filing_status", "status", "filed_at", "updated_at"])
        audit_record(
            actor=None,
            action=f"packet.readback_{run.verdict.lower()}",
            target_type="packet",
            target_id=packet.public_id,
            details={
                "run": run.pk,
                "reason": run.verdict_reason,
                "filing_status": packet.filing_status,
            },
        )
