"""Appeals (SPEC §17): a lost dispute whose response Vouch filed may be appealed while the provider
holds it in its appeal stage. An appeal is a packet version of kind `appeal`, prepared from the
filed response plus the evidence admitted since, with its own digest, its own approval by a person
who did not contribute to it, and its own filing and readback (`stripe.dispute.appeal_filed`).
The response's evidence is frozen at the provider: an appeal sends only its reason for filing and
the files of the new evidence. Preparing one never calls the provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput, PermissionDenied
from core.transitions import transition
from disputes import exceptions as errors
from disputes.evidence import AdmittedEvidence
from disputes.finalization import effect_claims
from disputes.models import (
    PACKET_STATUS,
    Dispute,
    Packet,
    PacketKind,
    PacketStatus,
    Posture,
)
from disputes.packets import handoff, packet_digest
from disputes.services import checks
from disputes.services.versions import _version_save

if TYPE_CHECKING:
    from accounts.models import User

APPEAL_DRAFTER = "vouch-appeal-rules"
# The provider's statuses in which a lost dispute may take an appeal: lost (Vouch may prepare while
# the provider opens the stage) and the stage itself. Filing reads the provider for the latter.
APPEALABLE = ("lost", "appeal_needs_response")
REASON_MAX_CHARS = 20_000
NO_NEW_EVIDENCE = (
    "No evidence was admitted since the response was filed: the bank decided on that evidence. "
    "Admit what is new (a delivery confirmation, the buyer's messages) and prepare the appeal "
    "again."
)


def _filed_response(dispute: Dispute) -> Packet | None:
    return (
        dispute.packets.filter(kind=PacketKind.RESPONSE, status=PacketStatus.FILED)
        .order_by("-version")
        .first()
    )


def appeal_validation(packet: Packet, filed: Packet | None = None) -> dict[str, Any]:
    """Deterministic checks of an appeal's content: every citation an admitted receipt or evidence
    ref of this version, a reason for filing within Stripe's bound, and no claim of an outcome."""
    admitted = {str(e.get("ref")) for e in packet.evidence_refs if isinstance(e, dict)}
    receipts = set(packet.receipt_ids)
    errors_: list[dict[str, str]] = []
    for citation in packet.citations:
        if citation not in admitted and citation not in receipts:
            errors_.append(
                {
                    "code": "citation_not_admitted",
                    "message": f"{citation} is neither an admitted receipt nor admitted evidence.",
                }
            )
    summary = packet.summary.strip()
    if not summary:
        errors_.append({"code": "appeal_reason_missing", "message": "Say why the bank erred."})
    if len(summary) > REASON_MAX_CHARS:
        errors_.append(
            {
                "code": "appeal_reason_too_long",
                "message": f"The reason is {len(summary):,} characters; at most "
                f"{REASON_MAX_CHARS:,}.",
            }
        )
    # The response it follows was filed and submitted (its readback proved it); nothing else is.
    claims = [c for c in effect_claims(summary) if c not in ("filed", "submitted")]
    if claims:
        errors_.append(
            {
                "code": "effect_claim",
                "message": f"The reason claims effects nothing here proves: {claims}.",
            }
        )
    return {"ok": not errors_, "errors": errors_}


def _status(packet: Packet) -> str:
    if not packet.validation.get("ok"):
        return PacketStatus.INVALID
    return PacketStatus.INCOMPLETE if packet.open_questions else PacketStatus.READY_FOR_REVIEW


def _derive(packet: Packet) -> str:
    """Validation, digest and handoff of an appeal's content; returns its status."""
    packet.validation = appeal_validation(packet)
    packet.digest = packet_digest(packet)
    packet.handoff = handoff(packet, digest=packet.digest, options={})
    return _status(packet)


def _appeal_draft(locked: Dispute, filed: Packet, requested_by: User | None) -> Packet:
    held = {str(e.get("ref")) for e in filed.evidence_refs if isinstance(e, dict)}
    evidence = list(locked.evidence.all())
    new = [e for e in evidence if e.ref not in held]
    newest = locked.packets.order_by("-version").first()
    receipts = [c for c in filed.citations if c.startswith("rcpt_")]
    summary = (
        f"Vouch asks for the decision on this dispute to be reviewed in the light of the evidence "
        f"admitted since its response (version {filed.version}), listed below with Vouch's signed "
        "receipts of the payment."
    )
    packet = Packet(
        dispute=locked,
        version=(newest.version if newest is not None else 0) + 1,
        kind=PacketKind.APPEAL,
        drafter=APPEAL_DRAFTER,
        posture=Posture.CONTEST,
        summary=summary,
        citations=receipts + [e.ref for e in new],
        evidence_refs=[
            AdmittedEvidence(e.ref, e.sha256, e.kind, e.summary, e.file_facts()).as_dict()
            for e in evidence
        ],
        open_questions=[] if new else [NO_NEW_EVIDENCE],
        receipt_ids=list(filed.receipt_ids),
        appeal={
            "based_on": {
                "packet": filed.public_id,
                "version": filed.version,
                "digest": filed.approved_digest or filed.digest,
            },
            "new_evidence": [e.ref for e in new],
        },
        requested_by=requested_by,
    )
    packet.status = _derive(packet)
    return packet


def appeal_prepare(*, dispute: Dispute, requested_by: User | None) -> Packet:
    """A new appeal version of a lost dispute whose response is filed (readback verified),
    superseding earlier appeal versions. Refused when there is no filed response, when the
    dispute is not lost or awaiting its appeal as Vouch last read it, and while an appeal's filing
    holds the dispute."""
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().get(pk=dispute.pk)
        checks.refuse_if_no_response_allowed(locked)
        filed = _filed_response(locked)
        if filed is None:
            raise errors.AppealNotPossible(
                "Only a dispute whose response Vouch filed (readback verified) can be appealed: "
                "this one has none.",
            )
        if locked.provider_status not in APPEALABLE:
            raise errors.AppealNotPossible(
                f"The dispute is {locked.provider_status or 'without a provider status'}: an "
                "appeal follows a loss (lost, then appeal_needs_response).",
                details={"provider_status": locked.provider_status},
            )
        checks.refuse_if_filing(locked, PacketKind.APPEAL)
        packet = _version_save(_appeal_draft(locked, filed, requested_by), "appeal")
    return packet


def appeal_edit(
    *, packet: Packet, actor: User, changes: dict[str, Any], confirmed_digest: str | None
) -> Packet:
    """A person's edit of an appeal version: its summary (the reason for filing) only. Like any
    edit it changes the digest and makes the editor a contributor who cannot approve it."""
    unknown = sorted(set(changes) - {"summary"})
    if unknown:
        raise errors.AppealNotEditable(
            details={name: ["Not edited on an appeal."] for name in unknown}
        )
    summary = changes.get("summary")
    if not isinstance(summary, str):
        raise InvalidInput(details={"summary": ["A reason for filing, as text."]})
    if not actor.has_perm("disputes.change_packet"):
        raise PermissionDenied("This needs the permission disputes.change_packet.")
    with transaction.atomic():
        locked = checks.lock_editable(packet, confirmed_digest)
        before = locked.digest
        locked.summary = summary
        status = _derive(locked)
        locked.last_edited_by = actor
        transition(
            locked,
            machine=PACKET_STATUS,
            to=status,
            actor=actor,
            action="packet.edit",
            also={
                "summary": locked.summary,
                "validation": locked.validation,
                "digest": locked.digest,
                "handoff": locked.handoff,
                "last_edited_by": actor,
                "updated_at": timezone.now(),
            },
            details={"fields": ["summary"], "digest_before": before, "digest": locked.digest},
        )
        locked.contributors.add(actor)
    return locked
