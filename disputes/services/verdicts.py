"""The readback's verdict on a filing: the only way a packet becomes `filed`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from core.transitions import transition
from disputes.models import PACKET_FILING, PACKET_STATUS, FilingStatus, Packet, PacketStatus
from disputes.services import checks
from verification.models import Verdict

if TYPE_CHECKING:
    from verification.models import VerificationRun


def packet_on_verdict(*, run: VerificationRun) -> None:
    """The readback decided: VERIFIED makes the packet `filed`. Any other verdict leaves it not
    filed (the engine escalates it to a person): `not_submitted` when the readback shows nothing
    submitted (the dispute is free for a new version), else `readback_failed` (it stays held)."""
    if run.verdict == Verdict.PENDING:
        return
    with transaction.atomic():
        packet = Packet.objects.select_for_update(of=("self",)).filter(filing_run_id=run.pk).first()
        if packet is None or packet.filing_status not in checks.UNDERWAY:
            return
        now = timezone.now()
        also: dict[str, object] = {"updated_at": now}
        if run.verdict == Verdict.VERIFIED:
            to = FilingStatus.FILED
            # What every page and the API say of it now: its content status moves too.
            PACKET_STATUS.check(packet.status, PacketStatus.FILED)
            also |= {"status": PacketStatus.FILED, "filed_at": now}
        else:
            # Not proven. If the readback shows nothing submitted, this filing did not happen and
            # the dispute is free for a new approved version; otherwise something was submitted
            # that is not shown to be this packet, and the dispute stays held for a person.
            to = (
                FilingStatus.NOT_SUBMITTED
                if checks.nothing_submitted(checks.readback_shows(packet), packet.kind)
                else FilingStatus.READBACK_FAILED
            )
        transition(
            packet,
            machine=PACKET_FILING,
            to=to,
            action=f"packet.readback_{run.verdict.lower()}",
            also=also,
            details={"run": run.pk, "reason": run.verdict_reason, "filing_status": to},
        )
