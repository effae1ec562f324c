"""What a packet is, as bytes: its content (what the digest covers), its digest, the exact
provider-filing request derived from that content, and its budget against the provider's limits.
Pure functions of the packet's fields (and the limits in settings).

**Evidence as Stripe's fields.** Only a `contest` or `refund_already_sent` packet has a filing
request; it sends the evidence the packet *cites*:

- each cited file goes to the first free file field of its kind: delivery →
  `shipping_documentation`; consent → `customer_signature`, then `customer_communication`;
  communication → `customer_communication`; policy → `refund_policy`; any kind, when its own
  fields are taken, → `uncategorized_file`. A file with no free field left makes the packet over
  its limits (`file_slots`): combine the documents into one PDF;
- a delivery item whose summary is nothing but tracking numbers (optionally after `Tracking:`),
  e.g. `1Z999AA10123456784` or `Tracking: 9400110898825022579493, 781234567890`, also gives
  `shipping_tracking_number` (the numbers, comma-separated); any other summary is prose and stays
  in the response text only;
- each cited policy item's summary gives `refund_policy_disclosure`;
- the packet's response — posture, summary, cited receipts, every cited evidence item with its
  SHA-256 and where its file went — is `uncategorized_text` ("any additional evidence or
  statements"; `product_description` describes the product sold, not the response).

A file field holds, in the request as reviewed and digested, a placeholder naming the file by its
SHA-256 (`{"file": {"ref", "sha256", "name", "size", "type"}}`): the provider's file id exists
only once filing uploads it. The digest covers this mapped request, so approving then filing
matches, and a file with other content (another SHA-256) gives another digest."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings

from disputes.models import FILEABLE_POSTURES, Dispute, Packet, PacketKind, Posture
from disputes.selectors import not_filed_text

FILING_METADATA_KEY = "vouch_packet_digest"
APPEAL_METADATA_KEY = "vouch_appeal_digest"  # an appeal's own: the response's digest stays
# Vouch's own bound on an appeal's `evidence.appeal.card.supporting_files`, not Stripe's (Stripe's
# changelog of 2026-10-28.endive and the SDK's types publish none): an appeal a reviewer reads
# whole, its documents combined into few files.
APPEAL_FILES_MAX = 5
# Stripe nests an appeal's response under the payment method it answers for: the pinned SDK's
# `DisputeUpdateParamsEvidenceAppeal` has only `card` (`reason_for_filing`, `supporting_files`),
# and a dispute shows it as `evidence.appeal.card` (changelog 2026-10-28.endive).
APPEAL_METHOD = "card"
APPEAL_REASON_FIELD = f"appeal.{APPEAL_METHOD}.reason_for_filing"
# A refund made outside Vouch and recorded by a four-eyes adjustment is cited by its public id.
ADJUSTMENT_PREFIX = "adj_"
CE3 = "visa_compelling_evidence_3"
VISA_COMPLIANCE = "visa_compliance"
MASTERCARD_COMPLIANCE = "mastercard_compliance"  # Stripe changelog 2026-06-24.dahlia
# The card networks' compliance programs: contesting costs the network's fee, which the approver
# acknowledges and filing sends as `enhanced_evidence.<program>.fee_acknowledged`.
COMPLIANCE_PROGRAMS = (VISA_COMPLIANCE, MASTERCARD_COMPLIANCE)
COMPLIANCE_LABELS = {
    VISA_COMPLIANCE: "Visa compliance",
    MASTERCARD_COMPLIANCE: "Mastercard compliance",
}


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
        # The evidence exactly as it is mapped to the provider's fields (files by SHA-256): an
        # approval binds what filing sends, not only what it is made from.
        "filing": evidence_mapping(packet),
    } | _round_two(packet)


def _round_two(packet: Packet) -> dict[str, Any]:
    """SPEC §17's content, present only when it holds something: a version prepared before it
    keeps its digest (and its approval)."""
    content: dict[str, Any] = {}
    if packet.kind != PacketKind.RESPONSE:
        content["kind"] = packet.kind
    for name in ("appeal", "enhanced", "costs"):
        value = getattr(packet, name)
        if value:
            content[name] = value
    return content


def compliance_program(dispute: Dispute) -> str | None:
    """The card network's compliance program the provider says the dispute is eligible for
    (`visa_compliance`, `mastercard_compliance`: in `enhanced_eligibility_types`), or None."""
    types = dispute.enhanced_eligibility_types
    if not isinstance(types, list):
        return None
    return next((program for program in COMPLIANCE_PROGRAMS if program in types), None)


def fee_acknowledgement_needed(packet: Packet) -> bool:
    """A response filed to a Visa or Mastercard compliance dispute: Stripe takes no submission
    without the network fee acknowledged, whatever Vouch calls the posture (SPEC §17, §18), so
    the approver must acknowledge it, and filing sends `fee_acknowledged` only then."""
    return (
        packet.kind == PacketKind.RESPONSE
        and packet.posture in FILEABLE_POSTURES
        and compliance_program(packet.dispute) is not None
    )


def ce3_claimed(packet: Packet) -> bool:
    """The filing sends Visa CE 3.0 evidence, whose qualification the readback must show."""
    evidence = evidence_mapping(packet) or {}
    return CE3 in (evidence.get("enhanced_evidence") or {})


def packet_digest(packet: Packet) -> str:
    return canonical_digest(packet_content(packet))


# Each kind's file fields, in the order they are taken; `uncategorized_file` last for every kind.
FILE_FIELDS: dict[str, tuple[str, ...]] = {
    "delivery": ("shipping_documentation", "uncategorized_file"),
    "consent": ("customer_signature", "customer_communication", "uncategorized_file"),
    "communication": ("customer_communication", "uncategorized_file"),
    "policy": ("refund_policy", "uncategorized_file"),
    "other": ("uncategorized_file",),
}
# Stripe's own bound on its short text fields (long ones: DISPUTES_EVIDENCE_FIELD_MAX_CHARS).
SHORT_TEXT_FIELDS = {"shipping_tracking_number": 5000}
_TRACKING = re.compile(
    r"^(?:tracking(?:\s+(?:number|no\.?|#))?\s*:?\s*)?"
    r"((?=[A-Za-z]*\d)[A-Za-z0-9]{8,40}(?:\s*,\s*(?=[A-Za-z]*\d)[A-Za-z0-9]{8,40})*)$",
    re.IGNORECASE,
)


def tracking_numbers(summary: str) -> list[str]:
    """The tracking numbers a delivery summary consists of, or [] when it is prose."""
    match = _TRACKING.match(summary.strip())
    if match is None:
        return []
    return [n.strip() for n in match.group(1).split(",")]


def is_fileable(packet: Packet) -> bool:
    return packet.posture in FILEABLE_POSTURES


def _cited_evidence(packet: Packet) -> list[dict[str, Any]]:
    cited = set(packet.citations)
    return [e for e in packet.evidence_refs if isinstance(e, dict) and e.get("ref") in cited]


def _file_slots(packet: Packet) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Which file field each cited file takes, and the refs of the files left without one."""
    slots: dict[str, dict[str, Any]] = {}
    unplaced: list[str] = []
    for item in _cited_evidence(packet):
        facts = item.get("file")
        if not facts:
            continue
        free = [f for f in FILE_FIELDS.get(item["kind"], ("uncategorized_file",)) if f not in slots]
        if not free:
            unplaced.append(item["ref"])
            continue
        slots[free[0]] = {"ref": item["ref"], "sha256": item["sha256"], **facts}
    return slots, unplaced


def evidence_text(packet: Packet) -> str:
    """The response as Stripe receives it (`evidence[uncategorized_text]`): the packet's content,
    and nothing else."""
    lines = [f"Posture: {packet.posture}", "", packet.summary.strip()]
    receipts = [c for c in packet.citations if c.startswith("rcpt_")]
    if receipts:
        lines += ["", "Vouch receipts cited:", *(f"- {r}" for r in receipts)]
    recorded = [c for c in packet.citations if c.startswith(ADJUSTMENT_PREFIX)]
    if recorded:
        lines += ["", "Refunds recorded by Vouch's four-eyes adjustments, as Stripe showed them:"]
        lines += [f"- {a}" for a in recorded]
    if _ce3_sent(packet) is not None:
        lines += ["", "Visa Compelling Evidence 3.0: qualified by two prior undisputed charges:"]
        lines += [
            f"- {p['charge']} ({p['age_days']} days before; matching {', '.join(p['matched'])};"
            f" receipt {p['receipt_id']})"
            for p in packet.enhanced[CE3].get("priors") or []
        ]
    evidence = _cited_evidence(packet)
    if evidence:
        slots, _ = _file_slots(packet)
        placed = {slot["ref"]: name for name, slot in slots.items()}
        lines += ["", "Evidence cited:"]
        for e in evidence:
            line = f"- {e['ref']} ({e['kind']}, sha256 {e['sha256']}): {e['summary']}"
            if e["ref"] in placed:
                line += f" [file {e['file']['name']}, sent as {placed[e['ref']]}]"
            lines.append(line)
    return "\n".join(lines)


def evidence_mapping(packet: Packet) -> dict[str, Any] | None:
    """The evidence hash the filing sends, its files as SHA-256 placeholders; None for a packet
    whose posture is not filed."""
    if not is_fileable(packet):
        return None
    if packet.kind == PacketKind.APPEAL:
        return appeal_mapping(packet)
    slots, _ = _file_slots(packet)
    fields: dict[str, Any] = {name: {"file": slot} for name, slot in slots.items()}
    cited = _cited_evidence(packet)
    tracking = [n for e in cited if e["kind"] == "delivery" for n in tracking_numbers(e["summary"])]
    if tracking:
        fields["shipping_tracking_number"] = ", ".join(tracking)
    policies = [e["summary"] for e in cited if e["kind"] == "policy"]
    if policies:
        fields["refund_policy_disclosure"] = "\n\n".join(policies)
    fields["uncategorized_text"] = evidence_text(packet)
    ce3 = _ce3_sent(packet)
    if ce3 is not None:
        # Only what the receipts showed (disputes.ce3); the readback checks the qualification.
        fields["enhanced_evidence"] = {CE3: ce3}
    return dict(sorted(fields.items()))


def _ce3_sent(packet: Packet) -> dict[str, Any] | None:
    """The Visa CE 3.0 evidence a response sends: a contest's, qualified from the receipts."""
    ce3 = packet.enhanced.get(CE3) or {}
    if packet.posture != Posture.CONTEST or ce3.get("status") != "qualified":
        return None
    return dict(ce3["evidence"]) if ce3.get("evidence") else None


def appeal_files(packet: Packet) -> list[dict[str, Any]]:
    """The files an appeal sends: those of the cited evidence admitted since the response was
    filed (the response's own were submitted with it), as SHA-256 placeholders."""
    new = set(packet.appeal.get("new_evidence") or [])
    return [
        {"ref": item["ref"], "sha256": item["sha256"], **item["file"]}
        for item in _cited_evidence(packet)
        if item["ref"] in new and item.get("file")
    ]


def appeal_text(packet: Packet) -> str:
    """An appeal's `reason_for_filing`: the response it follows, the person's or the drafter's
    reason, the receipts cited and the evidence admitted since."""
    based = packet.appeal.get("based_on") or {}
    lines = [
        f"Appeal of dispute {packet.dispute.provider_dispute_id}.",
        f"Response filed: version {based.get('version')}, packet digest {based.get('digest')}.",
        "",
        packet.summary.strip(),
    ]
    receipts = [c for c in packet.citations if c.startswith("rcpt_")]
    if receipts:
        lines += ["", "Vouch receipts cited:", *(f"- {r}" for r in receipts)]
    new = set(packet.appeal.get("new_evidence") or [])
    cited = [e for e in _cited_evidence(packet) if e["ref"] in new]
    if cited:
        lines += ["", "Evidence admitted since the response:"]
        lines += [
            f"- {e['ref']} ({e['kind']}, sha256 {e['sha256']}): {e['summary']}" for e in cited
        ]
    return "\n".join(lines)


def appeal_mapping(packet: Packet) -> dict[str, Any]:
    """Stripe's `evidence.appeal.card`: the reason for filing and the supporting files; nothing
    else of the evidence (frozen after the response)."""
    card: dict[str, Any] = {"reason_for_filing": appeal_text(packet)}
    files = appeal_files(packet)
    if files:
        card["supporting_files"] = [{"file": f} for f in files]
    return {"appeal": {APPEAL_METHOD: card}}


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("file"), dict)


def file_placeholders(evidence: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The file fields of a mapped evidence hash, wherever they are: field path (`shipping_
    documentation`, `appeal.card.supporting_files.0`) -> {ref, sha256, name, size, type}."""
    found: dict[str, dict[str, Any]] = {}

    def walk(path: str, value: Any) -> None:
        if _is_placeholder(value):
            found[path] = value["file"]
        elif isinstance(value, dict):
            for name, inner in value.items():
                walk(f"{path}.{name}" if path else name, inner)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(f"{path}.{index}", inner)

    walk("", evidence)
    return found


def evidence_with_file_ids(evidence: dict[str, Any], file_ids: dict[str, str]) -> dict[str, Any]:
    """The mapped evidence as sent: each file placeholder replaced by the provider's file id of
    its SHA-256 (`file_ids`), which filing got from the Files API; everything else as it is."""

    def sent(value: Any) -> Any:
        if _is_placeholder(value):
            return file_ids[value["file"]["sha256"]]
        if isinstance(value, dict):
            return {name: sent(inner) for name, inner in value.items()}
        if isinstance(value, list):
            return [sent(inner) for inner in value]
        return value

    return dict(sent(evidence))


def filing_request(packet: Packet, *, digest: str) -> dict[str, Any] | None:
    """The dispute update Vouch sends: the mapped evidence (files as SHA-256 placeholders until
    filing uploads them), the digest in metadata, submit=true. None for a packet whose posture is
    not filed (only `contest` and `refund_already_sent` are)."""
    evidence = evidence_mapping(packet)
    if evidence is None:
        return None
    program = compliance_program(packet.dispute)
    if packet.fee_acknowledged and program is not None and fee_acknowledgement_needed(packet):
        # The approver acknowledged the network fee with the approval of this digest.
        enhanced = dict(evidence.get("enhanced_evidence") or {})
        enhanced[program] = {"fee_acknowledged": True}
        evidence = dict(sorted({**evidence, "enhanced_evidence": enhanced}.items()))
    key = APPEAL_METADATA_KEY if packet.kind == PacketKind.APPEAL else FILING_METADATA_KEY
    return {
        "dispute_id": packet.dispute.provider_dispute_id,
        "evidence": evidence,
        "metadata": {key: digest},
        "submit": True,
    }


def handoff(packet: Packet, *, digest: str, options: dict[str, Any]) -> dict[str, Any]:
    """The provider-filing handoff shown for review: the operation, the exact request and its
    digest, and any filing options the drafter proposed (an idempotency key among them). A packet
    whose posture is not filed has no request at all, and says why."""
    request = filing_request(packet, digest=digest)
    out: dict[str, Any] = {
        "provider": packet.dispute.provider,
        "operation": "dispute.file" if request is not None else None,
        "request": request,
        "request_digest": canonical_digest(request) if request is not None else None,
    }
    if request is None:
        out["not_filed"] = not_filed_text(packet.posture)
    if options:
        out["options"] = dict(options)
    return out


# --- the budget: the provider's limits, checked before approval ---------------------------------


@dataclass(frozen=True)
class Budget:
    """A fileable packet's request against the provider's limits (settings)."""

    text_chars: int
    text_max: int
    fields: list[tuple[str, int, int]]  # (text field, characters, its maximum), longest first
    file_bytes: int
    files_max: int
    files: list[dict[str, Any]]  # {field, ref, sha256, name, size, type}
    unplaced: list[str]  # refs of cited files no file field is left for
    problems: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _texts(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """The text fields of a mapped evidence hash: top-level strings and an appeal's reason
    (`appeal.card.reason_for_filing`)."""
    texts = [(name, value) for name, value in evidence.items() if isinstance(value, str)]
    reason: Any = evidence
    for part in APPEAL_REASON_FIELD.split("."):
        reason = reason.get(part) if isinstance(reason, dict) else None
    if isinstance(reason, str):
        texts.append((APPEAL_REASON_FIELD, reason))
    return texts


def field_max(name: str) -> int:
    limit = int(settings.DISPUTES_EVIDENCE_FIELD_MAX_CHARS)
    return min(limit, SHORT_TEXT_FIELDS.get(name, limit))


def packet_budget(packet: Packet) -> Budget | None:
    """What the filing request spends of each limit — all text together
    (DISPUTES_EVIDENCE_TEXT_MAX_CHARS), each text field (DISPUTES_EVIDENCE_FIELD_MAX_CHARS, or
    Stripe's lower bound on a short field), the files together (DISPUTES_EVIDENCE_FILES_MAX_BYTES),
    a file field for every cited file — and the limits it breaks. None when nothing is filed."""
    evidence = evidence_mapping(packet)
    if evidence is None:
        return None
    placeholders = file_placeholders(evidence)
    texts = sorted(
        ((name, len(value), field_max(name)) for name, value in _texts(evidence)
         if name not in placeholders),
        key=lambda row: (-row[1], row[0]),
    )  # fmt: skip
    text_chars = sum(n for _, n, _ in texts)
    text_max = int(settings.DISPUTES_EVIDENCE_TEXT_MAX_CHARS)
    files = [{"field": name, **slot} for name, slot in sorted(placeholders.items())]
    file_bytes = sum(int(f.get("size") or 0) for f in files)
    files_max = int(settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES)
    # An appeal's files go to one list (`supporting_files`), not to fields of their kinds.
    _, unplaced = _file_slots(packet) if packet.kind == PacketKind.RESPONSE else ({}, [])
    problems: list[dict[str, Any]] = []
    if text_chars > text_max:
        problems.append(
            {
                "limit": "text_total",
                "message": f"All evidence text is {text_chars:,} characters; at most "
                f"{text_max:,} are sent.",
            }
        )
    for name, chars, limit in texts:
        if chars > limit:
            problems.append(
                {
                    "limit": "text_field",
                    "field": name,
                    "message": f"{name} is {chars:,} characters; at most {limit:,}.",
                }
            )
    if file_bytes > files_max:
        problems.append(
            {
                "limit": "files",
                "message": f"The evidence files are {file_bytes:,} bytes together; at most "
                f"{files_max:,}.",
            }
        )
    if packet.kind == PacketKind.APPEAL and len(files) > APPEAL_FILES_MAX:
        problems.append(
            {
                "limit": "file_slots",
                "refs": [f["ref"] for f in files[APPEAL_FILES_MAX:]],
                "message": f"Vouch files an appeal with at most {APPEAL_FILES_MAX} supporting "
                f"files; it cites {len(files)}: combine documents into one PDF.",
            }
        )
    if unplaced:
        problems.append(
            {
                "limit": "file_slots",
                "refs": unplaced,
                "message": "No file field is left for "
                + ", ".join(unplaced)
                + ": combine the documents of one kind into one PDF.",
            }
        )
    return Budget(
        text_chars=text_chars,
        text_max=text_max,
        fields=texts,
        file_bytes=file_bytes,
        files_max=files_max,
        files=files,
        unplaced=unplaced,
        problems=problems,
    )
