"""Packet versions (SPEC §9 steps 1-7): the material a draft is made from, a version prepared on
request, on a new receipt or on new evidence (superseding the last), and a person's edit of the
current version. Preparation never calls the provider to mutate anything."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.exceptions import InvalidInput, PermissionDenied
from core.idempotency import idempotency_attach
from core.transitions import transition
from disputes.drafting import Draft, DraftMaterial, ReceiptFact, drafter_from_settings
from disputes.evidence import AdmittedEvidence
from disputes.finalization import finalize
from disputes.models import (
    FILING_HOLDS,
    PACKET_STATUS,
    ApprovalStatus,
    Dispute,
    Evidence,
    Packet,
    PacketKind,
    PacketStatus,
    Posture,
)
from disputes.packets import (
    dispute_facts,
    handoff,
    packet_digest,
)
from disputes.services import checks
from disputes.services.appeals import appeal_edit
from disputes.services.round_two import ce3_prior_facts, costs_for, enhanced_for
from disputes.services.versions import _version_save
from envelopes.models import Adjustment, AdjustmentKind, AdjustmentStatus
from receipts.selectors import receipt_tree

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord

logger = logging.getLogger("vouch.disputes")


def _fact(check: Any) -> ReceiptFact:
    receipt = check.receipt
    body = receipt.body if isinstance(receipt.body, dict) else {}
    return ReceiptFact(
        id=receipt.id,
        kind=receipt.kind,
        amount_micro=int(receipt.amount_micro),
        provider_object_id=receipt.provider_object_id,
        detail=dict(body.get("detail") or {}),
    )


# The kind a refund recorded by adjustment has among the refunds a drafter sees.
RECORDED_REFUND = "foreign_refund"


def recorded_refunds(charge_id: str) -> list[ReceiptFact]:
    """The refunds of a charge made outside Vouch (in Stripe's Dashboard) and recorded by a
    four-eyes adjustment (`foreign_refund`, applied, its money not given back since): a refund
    made, as the provider's read the approval cites showed it (SPEC §18). Each is cited by the
    adjustment's public id (`adj_…`), admitted like a receipt id."""
    rows = (
        Adjustment.objects.select_related("approval_read")
        .filter(
            kind=AdjustmentKind.FOREIGN_REFUND,
            status=AdjustmentStatus.APPLIED,
            released_at__isnull=True,
            approval_read__isnull=False,
        )
        .filter(
            Q(funding_leg__charge_id=charge_id) | Q(refund_leg__funding_leg__charge_id=charge_id)
        )
        .order_by("decided_at", "id")
    )
    facts = []
    for row in rows:
        read = row.approval_read
        if read is None:  # filtered out already; for the type checker
            continue
        shown = row.provider_object if isinstance(row.provider_object, dict) else {}
        facts.append(
            ReceiptFact(
                id=row.public_id,
                kind=RECORDED_REFUND,
                amount_micro=int(row.amount_micro),
                provider_object_id=row.provider_object_id,
                detail={
                    "id": row.provider_object_id,
                    "status": str(shown.get("status") or ""),
                    "provider_read": read.public_id,
                    "provider_read_sha256": read.sha256,
                },
            )
        )
    return facts


def material_for(dispute: Dispute) -> DraftMaterial:
    """SPEC §9 steps 1-4: the normalized dispute, its charge and refunds resolved by receipt id
    from Vouch's own receipts (never from the caller) — a refund recorded by four-eyes adjustment
    counting as a refund made (`recorded_refunds`, SPEC §18) — and the admitted evidence."""
    tree = receipt_tree(charge_id=dispute.charge_id)
    charge = _fact(tree.charge) if tree.charge is not None and tree.charge.ok else None
    refunds = [_fact(c) for c in tree.unreversed_refunds() if c.ok]
    refunds += recorded_refunds(dispute.charge_id)
    evidence = [
        AdmittedEvidence(
            ref=e.ref, sha256=e.sha256, kind=e.kind, summary=e.summary, file=e.file_facts()
        )
        for e in dispute.evidence.all()
    ]
    return DraftMaterial(
        dispute=dispute_facts(dispute),
        tree_complete=bool(tree.complete),
        tree_problems=list(tree.problems),
        undecided_refund_legs=list(tree.undecided_refund_legs),
        charge_receipt=charge,
        refund_receipts=refunds,
        evidence=evidence,
        ce3_priors=ce3_prior_facts(dispute),
    )


def _status_for(posture: str, ok: bool) -> str:
    if not ok:
        return PacketStatus.INVALID
    if posture == Posture.NEEDS_MORE_EVIDENCE:
        return PacketStatus.INCOMPLETE
    return PacketStatus.READY_FOR_REVIEW


# What an edit rewrites besides the status (`_apply`, the evidence refs, the editor).
_EDITED = (
    "posture",
    "summary",
    "citations",
    "open_questions",
    "validation",
    "receipt_ids",
    "digest",
    "handoff",
    "evidence_refs",
    "last_edited_by",
)


def _apply(packet: Packet, draft: Draft | Mapping[str, Any], material: DraftMaterial) -> str:
    """Step 6 on a draft, then the derived fields: validation, digest, handoff. Returns the status
    the content gives the version, which the caller sets (a new row) or moves to (an edit)."""
    final = finalize(draft, material)
    packet.posture = final.draft.posture
    packet.summary = final.draft.summary
    packet.citations = list(final.draft.citations)
    packet.open_questions = list(final.draft.open_questions)
    packet.validation = final.validation()
    packet.receipt_ids = list(material.receipt_ids)
    packet.digest = packet_digest(packet)
    packet.handoff = handoff(packet, digest=packet.digest, options=final.draft.filing_options)
    return _status_for(packet.posture, final.ok)


def packet_prepare(
    *,
    dispute: Dispute,
    requested_by: User | None,
    idempotency: IdempotencyRecord | None = None,
) -> Packet:
    """Prepare a new version (SPEC §9 steps 1-7) with the configured drafter, its output finalized.
    Earlier versions are superseded. Its contributors: whoever asked for it and whoever admitted
    the evidence it holds; a version the system prepared on its own from receipts alone has none.
    Refused while a filing holds the dispute, and for a dispute the card network allows no
    response to (`dispute_response_not_allowed`). The request's idempotency record names the version
    in the transaction that saves it; a resumed request returns that version, never a new one."""
    if idempotency is not None and idempotency.resource:
        return Packet.objects.select_related("dispute").get(public_id=idempotency.resource)
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().get(pk=dispute.pk)
        checks.refuse_if_no_response_allowed(locked)
        checks.refuse_if_filing(locked)
        packet = _version_save(_version_draft(locked, requested_by=requested_by), "request")
        idempotency_attach(idempotency, packet.public_id)
    return packet


def _version_draft(locked: Dispute, *, requested_by: User | None) -> Packet:
    """The next version of a locked dispute's packet, drafted and finalized, not yet saved."""
    drafter = drafter_from_settings()
    material = material_for(locked)
    draft = drafter.draft(material)
    newest = locked.packets.order_by("-version").first()
    packet = Packet(
        dispute=locked,
        version=(newest.version if newest is not None else 0) + 1,
        drafter=getattr(drafter, "name", type(drafter).__name__),
        evidence_refs=[e.as_dict() for e in material.evidence],
        requested_by=requested_by,
        # SPEC §17, computed from Vouch's receipts and the fee table, bound by the digest.
        enhanced=enhanced_for(locked),
        costs=costs_for(locked),
    )
    packet.status = _apply(packet, draft, material)  # a new row: its first status
    return packet


def _catches_up(dispute: Dispute) -> bool:
    """A dispute whose current version is neither approved nor filed (nor being filed) takes a new
    version by itself when its material changes; an approved one waits for a person (a new
    version would silently drop the approval). A dispute the network allows no response to takes
    none."""
    if not dispute.response_allowed:
        return False
    if dispute.packets.filter(filing_status__in=FILING_HOLDS).exists():
        return False
    newest = dispute.packets.order_by("-version").first()
    return newest is None or newest.approval_status != ApprovalStatus.APPROVED


def packets_catch_up(*, charge_id: str) -> list[Packet]:
    """A receipt for `charge_id` was written (and committed): every dispute on that charge whose
    current version may be replaced gets a new version from the receipts as they are now, if it
    says anything new. Nobody asked for it: the receipt adds no contributor. Each dispute in its
    own transaction, so one that fails leaves the others caught up."""
    prepared = []
    for dispute_pk in Dispute.objects.filter(charge_id=charge_id).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                locked = Dispute.objects.select_for_update().get(pk=dispute_pk)
                if not _catches_up(locked):
                    continue
                packet = _version_draft(locked, requested_by=None)
                newest = locked.packets.order_by("-version").first()
                if newest is not None and (newest.digest, newest.receipt_ids) == (
                    packet.digest,
                    packet.receipt_ids,
                ):
                    continue  # the receipt changes nothing the packet says
                prepared.append(_version_save(packet, "receipt"))
        except Exception:  # one dispute's failure must not keep the others behind
            logger.exception("dispute %s: catching up on charge %s failed", dispute_pk, charge_id)
    return prepared


def _edit_material(packet: Packet, citations: Any) -> tuple[DraftMaterial, list[Evidence]]:
    """What an edit of `packet` is finalized against: the receipts as they are now, the version's
    own evidence, and the dispute's other admitted evidence that the edit cites (which joins the
    version; returned second). Evidence neither held nor cited stays out: an edit cannot lean on
    material the digest would not bind."""
    material = material_for(packet.dispute)
    held = [AdmittedEvidence(**e) for e in packet.evidence_refs]
    own = {e.ref for e in held}
    cited = {str(c) for c in citations} if isinstance(citations, list) else set()
    joined = [e for e in packet.dispute.evidence.all() if e.ref in cited and e.ref not in own]
    evidence = held + [
        AdmittedEvidence(e.ref, e.sha256, e.kind, e.summary, e.file_facts()) for e in joined
    ]
    return replace(material, evidence=evidence), joined


def packet_edit(
    *,
    packet: Packet,
    actor: User,
    changes: Mapping[str, Any],
    confirmed_digest: str | None = None,
) -> Packet:
    """A person's edit of the current version, in place: it goes through finalization again, its
    digest changes (an approval of the old content no longer matches), and the editor becomes a
    contributor who cannot approve this version. Evidence admitted to the dispute after this
    version was prepared, when the edit cites it, joins the version: its evidence refs gain it (so
    the digest binds its SHA-256 and filing sends it) and its admitter becomes a contributor."""
    if packet.kind == PacketKind.APPEAL:
        return appeal_edit(
            packet=packet, actor=actor, changes=dict(changes), confirmed_digest=confirmed_digest
        )
    allowed = {"posture", "summary", "citations", "open_questions"}
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise InvalidInput(details={name: ["Unknown field."] for name in unknown})
    if not actor.has_perm("disputes.change_packet"):
        raise PermissionDenied("This needs the permission disputes.change_packet.")
    with transaction.atomic():
        locked = checks.lock_editable(packet, confirmed_digest)
        before = locked.digest
        draft = {
            "posture": locked.posture,
            "summary": locked.summary,
            "citations": list(locked.citations),
            "open_questions": list(locked.open_questions),
            "filing_options": dict(locked.handoff.get("options") or {}),
            **changes,
        }
        material, joined = _edit_material(locked, draft["citations"])
        locked.evidence_refs = [e.as_dict() for e in material.evidence]
        status = _apply(locked, draft, material)
        locked.last_edited_by = actor
        details: dict[str, Any] = {
            "fields": sorted(changes),
            "digest_before": before,
            "digest": locked.digest,
        }
        if joined:
            details["evidence_joined"] = [e.ref for e in joined]
        transition(
            locked,
            machine=PACKET_STATUS,
            to=status,
            actor=actor,
            action="packet.edit",
            also={name: getattr(locked, name) for name in _EDITED} | {"updated_at": timezone.now()},
            details=details,
        )
        locked.contributors.add(actor, *{e.admitted_by_id for e in joined if e.admitted_by_id})
    return locked
