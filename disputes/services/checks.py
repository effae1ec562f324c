"""The refusals every act on a packet shares: the packet's row lock, the current version, the
content a person confirmed, fileable content within the provider's limits, a dispute the card
network allows no response to, and a filing that holds the dispute (with what its readback
showed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.exceptions import VouchError
from disputes import exceptions as errors
from disputes.models import (
    FILING_HOLDS,
    Dispute,
    FilingStatus,
    Packet,
    PacketKind,
    PacketStatus,
)
from disputes.packets import packet_budget
from verification.models import Observation

UNDERWAY = (FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK)
# The channel of the `stripe.dispute.filed` contract that reads the dispute back.
READBACK_CHANNEL = "dispute_readback"


def lock_packet(packet: Packet) -> Packet:
    return (
        Packet.objects.select_for_update(of=("self",)).select_related("dispute").get(pk=packet.pk)
    )


def lock_editable(packet: Packet, confirmed_digest: str | None) -> Packet:
    """The packet's row lock for an edit: the current version, not filed, and (when given) the
    content the editor saw."""
    locked = lock_packet(packet)
    refuse_superseded(locked)
    if locked.filing_status != FilingStatus.NOT_FILED:
        raise filing_refusal(locked)
    if confirmed_digest is not None:  # the edit applies to the content the editor saw
        check_confirmed(locked, confirmed_digest)
    return locked


def refuse_superseded(packet: Packet) -> None:
    if packet.status == PacketStatus.SUPERSEDED:
        raise errors.PacketDrifted(
            "A newer version of this packet exists: review that one.",
            details={"packet": packet.public_id},
        )


def check_confirmed(packet: Packet, confirmed_digest: str) -> None:
    if confirmed_digest != packet.digest:
        raise errors.PacketDrifted(
            "The packet changed since it was shown: review it again.",
            details={"confirmed": confirmed_digest, "current": packet.digest},
        )


def check_fileable_content(packet: Packet) -> None:
    if packet.status == PacketStatus.INCOMPLETE:
        raise errors.PacketIncomplete(details={"open_questions": packet.open_questions})
    if packet.status == PacketStatus.INVALID or not packet.validation.get("ok"):
        raise errors.PacketInvalid(details={"errors": packet.validation.get("errors", [])})


def check_budget(packet: Packet) -> None:
    """Pre-flight: the filing request within the provider's limits (`disputes.packets.Budget`)."""
    budget = packet_budget(packet)
    if budget is not None and not budget.ok:
        raise errors.PacketOverLimit(
            "The packet is over the provider's limits: "
            + " ".join(p["message"] for p in budget.problems),
            details={"problems": budget.problems},
        )


def refuse_if_no_response_allowed(dispute: Dispute) -> None:
    """The provider last showed the dispute's `evidence_details.due_by` as 0: the card network
    allows no response, so none is prepared, approved or filed (nothing is sent)."""
    if not dispute.response_allowed:
        raise errors.DisputeResponseNotAllowed(
            details={
                "dispute": dispute.public_id,
                "provider_dispute_id": dispute.provider_dispute_id,
                "provider_status": dispute.provider_status or None,
            }
        )


def refuse_if_filing(dispute: Dispute, kind: str = PacketKind.RESPONSE) -> None:
    """A filing that holds the dispute (one submission of each kind per dispute at the provider:
    its response, its appeal) refuses any other version of that kind, saying which filing holds it
    and what is known of it."""
    holding = (
        dispute.packets.filter(filing_status__in=FILING_HOLDS, kind=kind)
        .select_related("filing_run")
        .first()
    )
    if holding is not None:
        raise filing_refusal(holding)


def readback_shows(packet: Packet) -> dict[str, Any] | None:
    """The dispute as the filing's readback last saw it at the provider (its evidence details),
    or None when no readback could read it."""
    if packet.filing_run_id is None:
        return None
    seen = (
        Observation.objects.filter(attempt__run_id=packet.filing_run_id, channel=READBACK_CHANNEL)
        .order_by("-observed_at", "-id")
        .values_list("data", flat=True)
        .first()
    )
    if not isinstance(seen, dict) or not isinstance(seen.get("evidence_details"), dict):
        return None
    return seen


def nothing_submitted(seen: Mapping[str, Any] | None, kind: str = PacketKind.RESPONSE) -> bool:
    """The readback shows no submission of this kind: no evidence submitted at all (a response),
    or the dispute still awaiting its appeal (an appeal)."""
    if seen is None:
        return False
    if kind == PacketKind.APPEAL:
        return seen.get("status") == "appeal_needs_response"
    return seen["evidence_details"].get("submission_count") == 0


def filing_refusal(packet: Packet) -> VouchError:
    """The refusal a version's filing state gives to any act on it (or, if it holds the dispute,
    on the dispute), naming the version, the filing and what its readback showed."""
    which = f"Version {packet.version} ({packet.public_id})"
    run = packet.filing_run
    run_name = run.public_id if run else "(none)"
    details: dict[str, Any] = {
        "packet": packet.public_id,
        "version": packet.version,
        "filing_status": packet.filing_status,
        "filing_key": packet.filing_key or None,
        "verification_run": run.public_id if run else None,
        "verification_verdict": run.verdict if run else None,
    }
    if packet.filing_status == FilingStatus.FILED:
        return errors.PacketAlreadyFiled(
            f"{which} is filed: its readback run {run_name} is VERIFIED. "
            "Nothing more is filed for this dispute.",
            details=details,
        )
    if packet.filing_status in UNDERWAY:
        return errors.PacketFilingUnderway(
            f"{which} is being filed ({packet.filing_status.replace('_', ' ')}, key "
            f"{packet.filing_key}): its readback decides whether it is filed; nothing else is "
            "prepared or filed for this dispute meanwhile.",
            details=details,
        )
    seen = readback_shows(packet)
    shown = (
        "no readback could read the dispute"
        if seen is None
        else f"the provider shows {seen['evidence_details'].get('submission_count')} "
        f"submission(s), method {seen['evidence_details'].get('submission_method') or 'unknown'}, "
        f"status {seen.get('status') or 'unknown'}"
    )
    verdict = f"{run.verdict} ({run.verdict_reason})" if run else "no readback run"
    if packet.filing_status == FilingStatus.NOT_SUBMITTED:
        return errors.PacketNotSubmitted(
            f"{which}'s filing was not proven (readback {verdict}) and {shown}: nothing "
            "submitted. This version is done: prepare a new version, have it approved and file "
            "that.",
            details=details,
        )
    return errors.PacketReadbackFailed(
        f"{which}'s filing was not proven: its readback ended {verdict}, and {shown}, so it "
        "cannot be shown that nothing was submitted. Nothing else is prepared or filed for this "
        f"dispute until a person resolves the escalation of run {run_name}.",
        details=details,
    )
