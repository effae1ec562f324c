"""What a packet is, as bytes: its content (what the digest covers), its digest, and the exact
provider-filing request derived from that content. Pure functions of the packet's fields."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from disputes.models import Dispute, Packet

FILING_METADATA_KEY = "vouch_packet_digest"


def dispute_facts(dispute: Dispute) -> dict[str, Any]:
    """The normalized dispute (SPEC §9 step 1)."""
    deadline = dispute.response_deadline
    return {
        "provider": dispute.provider,
        "dispute_id": dispute.provider_dispute_id,
        "charge_id": dispute.charge_id,
        "amount_micro": dispute.amount_micro,
        "currency": dispute.currency,
        "reason": dispute.reason,
        "response_deadline": deadline.isoformat().replace("+00:00", "Z") if deadline else None,
    }


def canonical_digest(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def packet_content(packet: Packet) -> dict[str, Any]:
    """Posture, summary, citations, evidence refs, open questions and the dispute answered: not
    ids, timestamps, approval or filing state (approving does not change the digest)."""
    return {
        "dispute": dispute_facts(packet.dispute),
        "posture": packet.posture,
        "summary": packet.summary,
        "citations": list(packet.citations),
        "evidence_refs": list(packet.evidence_refs),
        "open_questions": list(packet.open_questions),
    }


def packet_digest(packet: Packet) -> str:
    return canonical_digest(packet_content(packet))


def evidence_text(packet: Packet) -> str:
    """The response as Stripe receives it (`evidence[uncategorized_text]`): the packet's content,
    and nothing else."""
    lines = [f"Posture: {packet.posture}", "", packet.summary.strip()]
    receipts = [c for c in packet.citations if c.startswith("rcpt_")]
    if receipts:
        lines += ["", "Vouch receipts cited:", *(f"- {r}" for r in receipts)]
    cited = set(packet.citations)
    evidence = [e for e in packet.evidence_refs if e["ref"] in cited]
    if evidence:
        lines += ["", "Evidence cited:"]
        lines += [
            f"- {e['ref']} ({e['kind']}, sha256 {e['sha256']}): {e['summary']}" for e in evidence
        ]
    return "\n".join(lines)


def filing_request(packet: Packet, *, digest: str) -> dict[str, Any]:
    """The dispute update Vouch sends: evidence, the digest in metadata, submit=true."""
    return {
        "dispute_id": packet.dispute.provider_dispute_id,
        "evidence": {"uncategorized_text": evidence_text(packet)},
        "metadata": {FILING_METADATA_KEY: digest},
        "submit": True,
    }


def handoff(packet: Packet, *, digest: str, options: dict[str, Any]) -> dict[str, Any]:
    """The provider-filing handoff shown for review: the operation, the exact request and its
    digest, and any filing options the drafter proposed (an idempotency key among them)."""
    request = filing_request(packet, digest=digest)
    out: dict[str, Any] = {
        "provider": packet.dispute.provider,
        "operation": "dispute.file",
        "request": request,
        "request_digest": canonical_digest(request),
    }
    if options:
        out["options"] = dict(options)
    return out
