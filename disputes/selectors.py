"""Reads of disputes and packets, rendered as the API and the admin show them."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from core.exceptions import NotFound
from disputes.models import Dispute, Evidence, Packet
from envelopes.money import with_usd


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def disputes_filtered(
    *, dispute_id: str | None = None, charge: str | None = None
) -> QuerySet[Dispute]:
    """Deadline first (none last), then oldest. Filters: provider dispute id, charge id."""
    disputes = Dispute.objects.all()
    if dispute_id:
        disputes = disputes.filter(provider_dispute_id=dispute_id)
    if charge:
        disputes = disputes.filter(charge_id=charge)
    return disputes


def dispute_get(*, public_id: str) -> Dispute:
    dispute = Dispute.objects.filter(public_id=public_id).first()
    if dispute is None:
        raise NotFound()
    return dispute


def dispute_named(dispute_id: str) -> Dispute:
    """A dispute by Vouch's id (`dsp_…`) or the provider's (`dp_…`): one dispute, whichever name."""
    dispute = Dispute.objects.filter(
        Q(public_id=dispute_id) | Q(provider_dispute_id=dispute_id)
    ).first()
    if dispute is None:
        raise NotFound()
    return dispute


def packet_current(dispute: Dispute) -> Packet | None:
    return dispute.packets.order_by("-version").first()


def evidence_data(evidence: Evidence) -> dict[str, Any]:
    return {
        "evidence_id": evidence.public_id,
        "ref": evidence.ref,
        "sha256": evidence.sha256,
        "kind": evidence.kind,
        "summary": evidence.summary,
        "admitted_by": evidence.admitted_by.get_username() if evidence.admitted_by else None,
        "admitted_at": _iso(evidence.admitted_at),
    }


def packet_data(packet: Packet) -> dict[str, Any]:
    def name(user: Any) -> str | None:
        return user.get_username() if user is not None else None

    return {
        "packet_id": packet.public_id,
        "version": packet.version,
        "status": packet.status,
        "posture": packet.posture,
        "summary": packet.summary,
        "citations": list(packet.citations),
        "receipt_ids": list(packet.receipt_ids),
        "evidence_refs": list(packet.evidence_refs),
        "open_questions": list(packet.open_questions),
        "validation": packet.validation,
        "digest": packet.digest,
        "drafter": packet.drafter,
        "contributors": sorted(u.get_username() for u in packet.contributors.all()),
        "approval": {
            "status": packet.approval_status,
            "approved_by": name(packet.approved_by),
            "approved_at": _iso(packet.approved_at),
            "approved_digest": packet.approved_digest or None,
        },
        "filing": {
            "status": packet.filing_status,
            "provider_status": packet.provider_status,
            "filing_reference": packet.filing_reference or None,
            "dispute_id": packet.dispute.provider_dispute_id,
            "request_digest": packet.filing_request_digest or None,
            "provider_dispute_status": packet.filing_provider_state or None,
            "error_code": packet.filing_error or None,
            "verification_run": packet.filing_run.public_id if packet.filing_run else None,
            "verification_verdict": packet.filing_run.verdict if packet.filing_run else None,
            "filed_at": _iso(packet.filed_at),
        },
        "handoff": packet.handoff,
        "created_at": _iso(packet.created_at),
    }


def dispute_data(dispute: Dispute, *, detail: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "dispute_id": dispute.public_id,
        "provider": dispute.provider,
        "provider_dispute_id": dispute.provider_dispute_id,
        "charge": dispute.charge_id,
        "amount_micro": dispute.amount_micro,
        "currency": dispute.currency,
        "reason": dispute.reason,
        "response_deadline": _iso(dispute.response_deadline),
        "provider_status": dispute.provider_status or None,
        "intended_submission_method": dispute.intended_submission_method or None,
        "source": dispute.source,
        "created_at": _iso(dispute.created_at),
    }
    if detail:
        data["evidence"] = [
            evidence_data(e) for e in dispute.evidence.select_related("admitted_by")
        ]
        packet = packet_current(dispute)
        data["packet"] = packet_data(packet) if packet is not None else None
    return with_usd(data)
