"""The packet review page's context (what one version says, cites and proves, and the acts offered)
and the dispute's timeline rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.models import User
from core.dashboard import stripe_link
from core.display import money
from disputes.admin.common import (
    FILING_TONES,
    PERM_EDIT,
    PROVIDER_LABELS,
    STATUS_TONES,
    approval_label,
    evidence_file_url,
    filing_label,
    receipt_url,
    review_url,
)
from disputes.fees import break_even_words, fee_table
from disputes.forms import ApproveForm, EditForm, FileForm
from disputes.models import (
    FILING_HOLDS,
    ApprovalStatus,
    Dispute,
    Evidence,
    FilingStatus,
    Packet,
    PacketKind,
    PacketStatus,
)
from disputes.packets import (
    ADJUSTMENT_PREFIX,
    CE3,
    COMPLIANCE_LABELS,
    compliance_program,
    fee_acknowledgement_needed,
    packet_budget,
)
from disputes.selectors import (
    CE3_STATUS_LABELS,
    Ref,
    TimelineEntry,
    dispute_timeline,
    not_filed_text,
    packet_current,
    packet_stage_note,
    posture_label,
    provider_status_label,
    reason_label,
    response_deadline_note,
)
from disputes.services import (
    APPEALABLE,
    PERM_APPROVE,
    PERM_FILE,
    filing_key_proposal,
)
from envelopes.admin import micro
from verification.admin import VERDICT_TONES, pretty_json
from verification.models import VerificationRun

# --- the review page --------------------------------------------------------------------------


@dataclass(frozen=True)
class CitationRow:
    citation: str
    kind: str  # "receipt", "adjustment" (a refund recorded by one), "evidence", or "not admitted"
    url: str  # the receipt's admin page
    evidence: dict[str, Any] | None  # {ref, sha256, kind, summary} for an evidence ref


def citation_rows(packet: Packet) -> list[CitationRow]:
    evidence = {str(e.get("ref")): e for e in packet.evidence_refs if isinstance(e, dict)}
    rows = []
    for citation in packet.citations:
        if citation.startswith("rcpt_"):
            rows.append(CitationRow(citation, "receipt", receipt_url(citation), None))
        elif citation.startswith(ADJUSTMENT_PREFIX) and citation in packet.receipt_ids:
            rows.append(CitationRow(citation, "adjustment", "", None))
        elif citation in evidence:
            rows.append(CitationRow(citation, "evidence", "", evidence[citation]))
        else:
            rows.append(CitationRow(citation, "not admitted", "", None))
    return rows


def packet_page_context(packet: Packet, user: User) -> dict[str, Any]:
    """Everything the review page shows of one version, and which acts this person is offered."""
    dispute = packet.dispute
    current = packet_current(dispute)
    versions = list(dispute.packets.order_by("-version"))
    # A filing holds its kind only: a filed response leaves its appeal free to be filed.
    not_filing = not any(
        v.filing_status in FILING_HOLDS and v.kind == packet.kind for v in versions
    )
    approved = packet.approval_status == ApprovalStatus.APPROVED
    drifted = approved and packet.approved_digest != packet.digest
    live = packet.status != PacketStatus.SUPERSEDED and packet.filing_status == (
        FilingStatus.NOT_FILED
    )
    contributors = list(packet.contributors.order_by("username"))
    run = packet.filing_run
    # The card network allows no response (Stripe's `due_by` 0): nothing is approved or filed.
    respondable = dispute.response_allowed
    budget = packet_budget(packet)
    stage_note = packet_stage_note(packet)
    # What the approval service would refuse, said before anyone tries (disputes.services.checks).
    why_not = not_approvable(packet, budget) if live and respondable else None
    open_stage = respondable and stage_note is None
    can_approve = (
        open_stage
        and live
        and why_not is None
        and (not approved or drifted)
        and user.has_perm(PERM_APPROVE)
    )
    can_file = open_stage and live and approved and not_filing and user.has_perm(PERM_FILE)
    can_edit = live and user.has_perm(PERM_EDIT)
    proposed_key = filing_key_proposal(packet)
    citations = set(packet.citations)
    rows = {e.ref: e for e in dispute.evidence.all()}
    return {
        "packet": packet,
        "dispute": dispute,
        "current": current,
        "versions": [(v, review_url(v)) for v in versions],
        "deadline_note": response_deadline_note(dispute),
        "stage_note": stage_note,
        "not_approvable": why_not if stage_note is None else None,
        "posture_label": posture_label(packet.posture),
        "reason_label": reason_label(dispute.reason),
        "provider_status_label": provider_status_label(dispute.provider_status),
        "not_filed_text": not_filed_text(packet.posture),
        "break_even": break_even_words(packet.costs or {}),
        "ce3_status_label": CE3_STATUS_LABELS.get(
            str(((packet.enhanced or {}).get(CE3) or {}).get("status") or ""), ""
        ),
        "version_rows": [
            (v, url, posture_label(v.posture)) for v, url in ((v, review_url(v)) for v in versions)
        ],
        "status_tone": STATUS_TONES.get(packet.status, "neutral"),
        "amount": format_html(
            '{} <span class="vouch-quiet">({} micro-dollars)</span>',
            money(dispute.amount_micro),
            micro(dispute.amount_micro),
        ),
        "citations": citation_rows(packet),
        "evidence_refs": [
            (e, e.get("ref") in citations, _held_file_url(e, rows.get(str(e.get("ref")))))
            for e in packet.evidence_refs
        ],
        "budget": budget,
        "budget_rows": _budget_rows(budget) if budget is not None else [],
        "validation_ok": bool(packet.validation.get("ok")),
        "validation_errors": list(packet.validation.get("errors") or []),
        "contributors": contributors,
        "user_contributed": any(c.pk == user.pk for c in contributors),
        "approval_label": approval_label(
            packet.approval_status, packet.digest, packet.approved_digest
        ),
        "approved": approved,
        "drifted": drifted,
        "filing_label": filing_label(packet.filing_status),
        "filing_tone": FILING_TONES.get(packet.filing_status, "neutral"),
        "provider_label": PROVIDER_LABELS.get(packet.provider_status, packet.provider_status),
        "run": run,
        "run_url": (
            reverse("admin:verification_verificationrun_change", args=[run.pk]) if run else ""
        ),
        "run_tone": VERDICT_TONES.get(run.verdict, "neutral") if run else "neutral",
        "handoff_request": pretty_json(packet.handoff.get("request", {})),
        "handoff_options": (
            pretty_json(packet.handoff["options"]) if packet.handoff.get("options") else ""
        ),
        "proposed_key": proposed_key,
        # Asking for a version changes the packet (disputes.permissions: the same rule as the API).
        "can_prepare": (
            respondable
            and not_filing
            and packet.kind == PacketKind.RESPONSE
            and user.has_perm(PERM_EDIT)
        ),
        "approve_form": (
            ApproveForm(packet=packet, fee=compliance_fee_text(packet)) if can_approve else None
        ),
        **round_two_context(packet, versions, may_prepare=user.has_perm(PERM_EDIT)),
        "file_form": FileForm(packet=packet, proposed_key=proposed_key) if can_file else None,
        "edit_form": EditForm(packet=packet) if can_edit else None,
    }


def not_approvable(packet: Packet, budget: Any) -> str | None:
    """Why this version cannot be approved as it stands, in words (what is missing, what failed,
    what is over the limits); None when nothing stands in the way of an approval."""
    if packet.status == PacketStatus.INCOMPLETE:
        missing = " ".join(str(q) for q in packet.open_questions) or "an answer to its questions."
        return f"This version is incomplete, so it cannot be approved. What is missing: {missing}"
    if packet.status == PacketStatus.INVALID or not packet.validation.get("ok"):
        problems = " ".join(
            str(e.get("message") or "") for e in packet.validation.get("errors") or []
        )
        return f"This version failed validation, so it cannot be approved. {problems}".strip()
    if budget is not None and not budget.ok:
        return "This version is over Stripe's limits, so it cannot be approved (see the budget)."
    return None


def compliance_fee_text(packet: Packet) -> str | None:
    """The network fee an approver of this version must acknowledge (Visa's or Mastercard's
    compliance fee, as the version's costs show it), shown; None when none."""
    program = compliance_program(packet.dispute)
    if program is None or not fee_acknowledgement_needed(packet):
        return None
    fee = (packet.costs or {}).get(f"{program}_fee_micro")
    if not isinstance(fee, int) or not fee:
        fee = fee_table(packet.dispute.currency).compliance_fee(program)
    return f"{money(fee)} ({packet.dispute.currency.upper()})"


@dataclass(frozen=True)
class PriorRow:
    """One prior charge of a Visa CE 3.0 qualification, or a candidate it set aside."""

    charge: str
    receipt_id: str
    receipt_url: str
    occurred_at: str
    age_days: int | None
    matched: str
    why: str  # for a candidate set aside: the reason


def _prior_rows(rows: Any, *, chosen: bool) -> list[PriorRow]:
    out = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        receipt_id = str(row.get("receipt_id") or "")
        out.append(
            PriorRow(
                charge=str(row.get("charge") or ""),
                receipt_id=receipt_id,
                receipt_url=receipt_url(receipt_id) if receipt_id else "",
                occurred_at=str(row.get("occurred_at") or ""),
                age_days=row.get("age_days") if isinstance(row.get("age_days"), int) else None,
                matched=", ".join(str(m) for m in row.get("matched") or []),
                why="chosen" if chosen else str(row.get("reason") or row.get("why") or ""),
            )
        )
    return out


def _costs_rows(costs: dict[str, Any]) -> list[tuple[str, SafeString]]:
    if not costs:
        return []
    labels = [
        ("amount_micro", "At stake"),
        ("dispute_fee_micro", "Dispute fee"),
        ("lost_dispute_fee_micro", "Countering fee"),
        ("visa_compliance_fee_micro", "Visa compliance fee"),
        ("mastercard_compliance_fee_micro", "Mastercard compliance fee"),
        ("accept_micro", "Accept: you lose"),
        ("contest_won_micro", "Contest, won: you lose"),
        ("contest_lost_micro", "Contest, lost: you lose"),
    ]
    rows = []
    for key, label in labels:
        value = costs.get(key)
        if isinstance(value, int) and not (key.endswith("compliance_fee_micro") and not value):
            rows.append((label, format_html("{}", money(abs(value)))))
    return rows


def round_two_context(
    packet: Packet, versions: list[Packet], *, may_prepare: bool
) -> dict[str, Any]:
    """SPEC §17 on the review page: the kind, an appeal's ground, Visa CE 3.0 with its priors
    and receipt ids, the fee acknowledgement, the cost of each posture, and whether this person
    may prepare an appeal from this (filed) response."""
    dispute = packet.dispute
    ce3 = (packet.enhanced or {}).get(CE3)
    based = (packet.appeal or {}).get("based_on") or {}
    based_on = next((v for v in versions if v.public_id == based.get("packet")), None)
    appeal_holding = any(
        v.kind == PacketKind.APPEAL and v.filing_status in FILING_HOLDS for v in versions
    )
    return {
        "kind_label": packet.get_kind_display(),
        "appeal_based_on": based_on,
        "appeal_based_on_url": review_url(based_on) if based_on is not None else "",
        "appeal_new_evidence": list((packet.appeal or {}).get("new_evidence") or []),
        "ce3": ce3 if isinstance(ce3, dict) else None,
        "ce3_priors": _prior_rows((ce3 or {}).get("priors"), chosen=True),
        "ce3_considered": _prior_rows((ce3 or {}).get("considered"), chosen=False),
        "compliance_fee": compliance_fee_text(packet),
        "compliance_program": compliance_program(dispute),
        "compliance_label": COMPLIANCE_LABELS.get(compliance_program(dispute) or "", ""),
        "costs": packet.costs or None,
        "costs_rows": _costs_rows(packet.costs or {}),
        "can_appeal": (
            may_prepare
            and dispute.response_allowed
            and (packet.kind == PacketKind.APPEAL or packet.status == PacketStatus.FILED)
            and dispute.provider_status in APPEALABLE
            and not appeal_holding
        ),
    }


def _held_file_url(item: dict[str, Any], row: Evidence | None) -> str:
    """The file of a packet's evidence ref, when the admitted row holds that very file."""
    if row is None or not item.get("file") or row.sha256 != item.get("sha256"):
        return ""
    return evidence_file_url(row)


@dataclass(frozen=True)
class BudgetRow:
    what: str
    used: int
    limit: int
    unit: str

    @property
    def over(self) -> bool:
        return self.used > self.limit

    @property
    def used_text(self) -> str:
        return f"{self.used:,}"

    @property
    def limit_text(self) -> str:
        return f"{self.limit:,}"

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 100


def _budget_rows(budget: Any) -> list[BudgetRow]:
    rows = [BudgetRow("All evidence text", budget.text_chars, budget.text_max, "characters")]
    rows += [
        BudgetRow(f"Field {name}", chars, limit, "characters")
        for name, chars, limit in budget.fields
    ]
    rows.append(
        BudgetRow(f"Files ({len(budget.files)})", budget.file_bytes, budget.files_max, "bytes")
    )
    return rows


# --- the dispute's timeline ---------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineLink:
    label: str
    url: str
    external: bool = False


def _links(entry: TimelineEntry, runs: dict[str, int]) -> list[TimelineLink | SafeString | str]:
    """Each of an entry's references as a link: the packet's review page, the run page, the
    receipt page, the evidence file, the escalation, the stored event, the Stripe Dashboard."""
    out: list[TimelineLink | SafeString | str] = []
    for ref in entry.refs:
        out.append(_link(ref, runs))
    return [link for link in out if link]


def _link(ref: Ref, runs: dict[str, int]) -> TimelineLink | SafeString | str:
    if ref.kind == "stripe":
        return stripe_link(ref.id) if ref.id else ""
    if ref.kind == "packet" and ref.pk is not None:
        return TimelineLink("review page", reverse("admin:disputes_packet_review", args=[ref.pk]))
    if ref.kind == "run":
        pk = ref.pk if ref.pk is not None else runs.get(ref.id)
        if pk is None:
            return ""
        return TimelineLink(
            f"run {ref.id}", reverse("admin:verification_verificationrun_change", args=[pk])
        )
    if ref.kind == "receipt":
        url = receipt_url(ref.id)
        return TimelineLink(f"receipt {ref.id[:18]}…", url) if url else ""
    if ref.kind == "evidence" and ref.pk is not None:
        return TimelineLink("evidence", reverse("admin:disputes_evidence_change", args=[ref.pk]))
    if ref.kind == "escalation" and ref.pk is not None:
        return TimelineLink(
            f"escalation {ref.pk}", reverse("admin:verification_escalation_change", args=[ref.pk])
        )
    if ref.kind == "event" and ref.pk is not None:
        return TimelineLink(
            "stored event", reverse("admin:verification_providerevent_change", args=[ref.pk])
        )
    return ""


def timeline_rows(dispute: Dispute) -> list[tuple[TimelineEntry, list[Any]]]:
    entries = dispute_timeline(dispute)
    wanted = {r.id for e in entries for r in e.refs if r.kind == "run" and r.pk is None}
    runs = dict(VerificationRun.objects.filter(public_id__in=wanted).values_list("public_id", "pk"))
    return [(entry, _links(entry, runs)) for entry in entries]
