"""Reads of disputes and packets, rendered as the API and the admin show them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from core.display import words_for as _words
from core.exceptions import NotFound
from core.models import AuditEvent
from disputes.models import (
    FILING_CONTRACTS,
    ApprovalStatus,
    Dispute,
    Evidence,
    FilingStatus,
    Packet,
    PacketKind,
    PacketStatus,
    Posture,
)
from envelopes.money import with_usd
from verification.models import ProviderEvent, VerificationRun


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


# What every surface says of a dispute without a response deadline: the card network allows no
# response (Stripe's `evidence_details.due_by` is 0), or no deadline is known (null, or a staff
# entry without one).
NO_RESPONSE_ALLOWED = "No response allowed (the card network allows none)"
NO_DEADLINE_KNOWN = "No deadline known"


def response_deadline_note(dispute: Dispute) -> str | None:
    """Why a dispute has no response deadline, in words; None when it has one."""
    if not dispute.response_allowed:
        return NO_RESPONSE_ALLOWED
    if dispute.response_deadline is None:
        return NO_DEADLINE_KNOWN
    return None


def charges_stripe_will_not_refund(*, charge_ids: list[str]) -> set[str]:
    """The charges among `charge_ids` that Stripe will not refund because of a dispute: those with
    a dispute on record whose last read says `is_charge_refundable: false`. An inquiry Stripe
    says is refundable is not among them, nor a dispute never read from the provider (a staff
    entry): Stripe's answer to the refund decides those."""
    wanted = [c for c in charge_ids if c]
    if not wanted:
        return set()
    return set(
        Dispute.objects.filter(charge_id__in=wanted, is_charge_refundable=False).values_list(
            "charge_id", flat=True
        )
    )


# --- words for people: one mapping per code (the API keeps the codes) --------------------------

POSTURE_LABELS: dict[str, str] = {
    Posture.ACCEPT: "Accept the dispute",
    Posture.CONTEST: "Contest the dispute",
    Posture.REFUND_ALREADY_SENT: "Refund already sent",
    Posture.NEEDS_MORE_EVIDENCE: "Needs more evidence",
    Posture.OPERATOR_REVIEW: "A person decides",
}
# Stripe's dispute statuses (the pinned SDK's `Dispute.status`), as a person reads them.
PROVIDER_STATUS_LABELS: dict[str, str] = {
    "": "Not read from Stripe yet",
    "needs_response": "Waiting for our response",
    "under_review": "Response sent; the bank is reviewing it",
    "won": "Won",
    "lost": "Lost",
    "prevented": "Prevented",
    "warning_needs_response": "Inquiry: waiting for our response",
    "warning_under_review": "Inquiry: response sent, under review",
    "warning_closed": "Inquiry closed",
    "appeal_needs_response": "Lost; the card network accepts an appeal",
    "appeal_under_review": "Appeal sent; the bank is reviewing it",
}
# Stripe's dispute reasons (`Dispute.reason`).
REASON_LABELS: dict[str, str] = {
    "bank_cannot_process": "The bank cannot process the charge",
    "check_returned": "Check returned",
    "credit_not_processed": "Refund or credit not processed",
    "customer_initiated": "Started by the customer",
    "debit_not_authorized": "Debit not authorized",
    "duplicate": "Duplicate charge",
    "fraudulent": "Fraud (the cardholder did not make the payment)",
    "general": "General",
    "incorrect_account_details": "Incorrect account details",
    "insufficient_funds": "Insufficient funds",
    "noncompliant": "Card network rules not followed (compliance)",
    "product_not_received": "Product not received",
    "product_unacceptable": "Product unacceptable",
    "subscription_canceled": "Subscription canceled",
    "unrecognized": "The cardholder does not recognize the payment",
}
CE3_STATUS_LABELS: dict[str, str] = {
    "qualified": "Qualified",
    "not_qualified": "Not qualified",
}


def posture_label(posture: str | None) -> str:
    return _words(POSTURE_LABELS, posture)


def provider_status_label(status: str | None) -> str:
    return _words(PROVIDER_STATUS_LABELS, status)


def reason_label(reason: str | None) -> str:
    return _words(REASON_LABELS, reason)


def not_filed_text(posture: str) -> str:
    """Why a packet of this posture has no filing request, in words."""
    return (
        f"Nothing is sent to Stripe for \u201c{posture_label(posture)}\u201d: Vouch files only "
        f"\u201c{posture_label(Posture.CONTEST)}\u201d and "
        f"\u201c{posture_label(Posture.REFUND_ALREADY_SENT)}\u201d."
    )


# --- the queues: what someone can act on now (the console's counts and the lists behind them) ----

# Stripe's statuses in which the dispute takes a response (empty: a staff entry not yet read).
RESPONSE_STAGE = ("", "needs_response", "warning_needs_response")
# ... and an appeal: Vouch may approve one while the dispute is lost (filing waits for the stage).
APPEAL_STAGE = ("lost", "appeal_needs_response")
APPEAL_OPEN = "appeal_needs_response"


def _filed_response() -> Q:
    return Q(packets__kind=PacketKind.RESPONSE, packets__status=PacketStatus.FILED)


def disputes_awaiting_response() -> QuerySet[Dispute]:
    """Disputes with a deadline that wait for an answer Vouch can give, deadline first: in the
    response stage, or in the appeal stage with a response Vouch filed (Stripe takes an appeal
    only of a decision on filed evidence; a dispute lost with nothing filed has no appeal to
    make). A dispute the card network allows no response to is not among them."""
    appealable = Dispute.objects.filter(_filed_response(), provider_status=APPEAL_OPEN)
    return (
        Dispute.objects.filter(response_deadline__isnull=False, response_allowed=True)
        .filter(Q(provider_status__in=RESPONSE_STAGE) | Q(pk__in=appealable.values("pk")))
        .order_by("response_deadline", "created_at")
    )


def _packets_actionable() -> QuerySet[Packet]:
    """Current, ready versions whose dispute's stage still takes them: a response while Stripe
    waits for the response, an appeal while the dispute is lost or awaits its appeal."""
    return Packet.objects.filter(
        status=PacketStatus.READY_FOR_REVIEW, dispute__response_allowed=True
    ).filter(
        Q(kind=PacketKind.RESPONSE, dispute__provider_status__in=RESPONSE_STAGE)
        | Q(kind=PacketKind.APPEAL, dispute__provider_status__in=APPEAL_STAGE)
    )


def packets_awaiting_approval() -> QuerySet[Packet]:
    """Ready versions nobody approved yet, which the dispute's stage still takes."""
    return _packets_actionable().filter(approval_status=ApprovalStatus.NOT_REQUESTED)


def packets_awaiting_filing() -> QuerySet[Packet]:
    """Approved, ready versions not filed (nor being filed), which the dispute's stage takes."""
    return _packets_actionable().filter(
        approval_status=ApprovalStatus.APPROVED, filing_status=FilingStatus.NOT_FILED
    )


def packet_stage_note(packet: Packet) -> str | None:
    """Why nothing can be done with this unfiled version at the dispute's stage, in words; None
    when the stage still takes it (or the version is filed, being filed, or superseded)."""
    if packet.filing_status != FilingStatus.NOT_FILED or packet.status in (
        PacketStatus.SUPERSEDED,
        PacketStatus.FILED,
    ):
        return None
    status = packet.dispute.provider_status
    if packet.kind == PacketKind.RESPONSE and status not in RESPONSE_STAGE:
        if status in APPEAL_STAGE:
            return (
                "The dispute was decided without a response from Vouch: Stripe takes no response "
                "now, and an appeal can follow only a response Vouch filed. Nothing can be "
                "approved or filed for it."
            )
        return (
            f"Stripe shows the dispute as \u201c{provider_status_label(status)}\u201d: it takes "
            "no response now, so this version cannot be approved or filed."
        )
    if packet.kind == PacketKind.APPEAL and status not in APPEAL_STAGE:
        return (
            f"Stripe shows the dispute as \u201c{provider_status_label(status)}\u201d: it takes "
            "no appeal now, so this version cannot be approved or filed."
        )
    return None


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
        "kind": packet.kind,
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
            "fee_acknowledged": packet.fee_acknowledged,
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
        "appeal": packet.appeal or None,
        "enhanced": packet.enhanced or None,
        "costs": with_usd(packet.costs) if packet.costs else None,  # as every money figure
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
        "response_allowed": dispute.response_allowed,
        "response_deadline_note": response_deadline_note(dispute),
        "case_type": dispute.case_type or None,
        "is_charge_refundable": dispute.is_charge_refundable,
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


# --- the dispute's timeline (the admin's dispute page) ------------------------------------------


@dataclass(frozen=True)
class Ref:
    """Something a timeline entry points to: `kind` is packet, run, receipt, evidence,
    escalation, event (a stored provider event) or stripe (an id at the provider)."""

    kind: str
    id: str
    pk: int | None = None


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str  # webhook, dispute, evidence, packet, approval, filing, readback, reminder, ...
    title: str
    detail: str = ""
    actor: str = ""
    refs: tuple[Ref, ...] = field(default_factory=tuple)


# Audit actions drawn from their own rows instead (which carry more: the file, the escalation).
_FROM_ROWS = {"dispute.evidence_admit", "dispute.deadline_reminder", "dispute.enter"}
_ACTION_KINDS = {
    "packet.prepare": "packet",
    "packet.supersede": "packet",
    "packet.edit": "edit",
    "packet.approve": "approval",
    "packet.file": "filing",
    "packet.file_refused": "filing",
    "packet.file_upload_unknown": "filing",
    "packet.file_answer": "filing",
    "dispute.submission_method": "dispute",
}


def _audit_entry(event: AuditEvent, packets: dict[str, Packet]) -> TimelineEntry:
    details = event.details if isinstance(event.details, dict) else {}
    packet = packets.get(event.target_id) if event.target_type == "packet" else None
    refs: list[Ref] = []
    if packet is not None:
        refs.append(Ref("packet", packet.public_id, packet.pk))
    version = f"version {packet.version}" if packet is not None else event.target_id
    action = event.action
    kind = _ACTION_KINDS.get(action, "readback" if action.startswith("packet.readback") else "")
    if action == "packet.prepare":
        title = f"Packet {version} prepared: {posture_label(details.get('posture')) or '?'}"
        detail = f"trigger {details.get('trigger', '?')}, digest {str(details.get('digest'))[:16]}…"
        if packet is not None:
            refs += [Ref("receipt", r) for r in packet.receipt_ids]
    elif action == "packet.edit":
        title = f"Packet {version} edited ({', '.join(details.get('fields') or [])})"
        detail = f"digest {str(details.get('digest'))[:16]}…"
        if details.get("evidence_joined"):
            detail += f"; evidence joined: {', '.join(details['evidence_joined'])}"
    elif action == "packet.approve":
        title = f"Packet {version} approved"
        detail = f"digest {str(details.get('digest'))[:16]}…"
    elif action == "packet.file":
        title = f"Packet {version} filing started"
        detail = f"key {details.get('filing_key')}"
    elif action == "packet.supersede":
        title = f"Packet {version} superseded by version {details.get('by_version', '?')}"
        detail = f"trigger {details.get('trigger', '?')}"
    elif action == "packet.file_refused":
        title = f"Packet {version}: the provider refused the filing"
        detail = (
            f"code {details.get('code')}, request {details.get('filing_reference') or '—'}; "
            "its readback decides what was filed"
        )
        refs += [Ref("stripe", str(f)) for f in (details.get("files") or {}).values()]
        if details.get("run"):
            refs.append(Ref("run", str(details["run"])))
    elif action == "packet.file_upload_unknown":
        title = f"Packet {version}: an evidence file's upload got no answer"
        detail = f"{details.get('code')}; the filing resumes with the same keys"
    elif action == "packet.file_answer":
        title = (
            f"Packet {version}: the provider answered the filing ({details.get('provider_status')})"
        )
        detail = (
            f"dispute status {details.get('dispute_status') or '—'}, request "
            f"{details.get('filing_reference') or '—'}"
            + (f", error {details['error_code']}" if details.get("error_code") else "")
            + "; a claim: the readback decides"
        )
        refs += [Ref("stripe", str(f)) for f in (details.get("files") or {}).values()]
        if details.get("run"):
            refs.append(Ref("run", str(details["run"])))
    elif action.startswith("packet.readback_"):
        title = f"Packet {version}: readback {action.removeprefix('packet.readback_').upper()}"
        detail = f"filing {details.get('filing_status')}; {details.get('reason') or ''}".strip("; ")
    elif action == "dispute.submission_method":
        title = f"Submission method set at the provider: {details.get('intended')}"
        detail = "Smart Disputes never submits on its own"
    else:
        title, detail = action, ""
    return TimelineEntry(
        at=event.created_at,
        kind=kind or "audit",
        title=title,
        detail=detail,
        actor=event.actor_label if event.actor_id else "",
        refs=tuple(refs),
    )


def dispute_timeline(dispute: Dispute) -> list[TimelineEntry]:
    """What happened to a dispute, oldest first: the provider's events (webhooks), its recording,
    the evidence admitted, every packet version prepared, edited, approved and filed, the
    provider's answers, the readback runs and their verdicts, and the deadline reminders — each
    with what it points to (packet, run, receipt, escalation, provider id)."""
    entries: list[TimelineEntry] = []
    provider_id = dispute.provider_dispute_id
    events = ProviderEvent.objects.filter(
        type__startswith="charge.dispute.", payload__data__object__id=provider_id
    ).order_by("received_at", "pk")
    for event in events:
        status = (
            "processed"
            if event.processed_at
            else f"not processed ({event.processing_error[:80]})"
            if event.processing_error
            else "waiting"
        )
        entries.append(
            TimelineEntry(
                at=event.received_at,
                kind="webhook",
                title=f"Webhook {event.type}",
                detail=f"{status}; {event.duplicates} duplicate deliveries"
                if event.duplicates
                else status,
                refs=(Ref("event", event.event_id, event.pk), Ref("stripe", event.event_id)),
            )
        )
    entered_by = dispute.entered_by.get_username() if dispute.entered_by else ""
    entries.append(
        TimelineEntry(
            at=dispute.created_at,
            kind="dispute",
            title="Dispute entered by staff"
            if dispute.source == "staff"
            else "Dispute recorded from the provider",
            detail=f"reason: {reason_label(dispute.reason)}, "
            + (
                "deadline " + dispute.response_deadline.strftime("%Y-%m-%d %H:%M:%S %Z")
                if dispute.response_deadline
                else str(response_deadline_note(dispute)).lower()
            ),
            actor=entered_by,
            refs=(Ref("stripe", provider_id), Ref("stripe", dispute.charge_id)),
        )
    )
    for evidence in dispute.evidence.select_related("admitted_by"):
        what = f"{evidence.kind}: {evidence.summary}"
        if evidence.file:
            what += f" (file {evidence.file_name}, {evidence.file_size:,} bytes)"
        entries.append(
            TimelineEntry(
                at=evidence.admitted_at,
                kind="evidence",
                title=f"Evidence {evidence.ref} admitted",
                detail=what,
                actor=evidence.admitted_by.get_username() if evidence.admitted_by else "",
                refs=(Ref("evidence", evidence.public_id, evidence.pk),),
            )
        )
    packets = {p.public_id: p for p in dispute.packets.all()}
    audit = AuditEvent.objects.filter(
        Q(target_type="dispute", target_id=dispute.public_id)
        | Q(target_type="packet", target_id__in=list(packets))
    ).exclude(action__in=_FROM_ROWS)
    entries += [_audit_entry(event, packets) for event in audit.select_related("actor")]
    runs = VerificationRun.objects.filter(
        contract_id__in=FILING_CONTRACTS, input__dispute=provider_id
    )
    for run in runs:
        entries.append(
            TimelineEntry(
                at=run.created_at,
                kind="readback",
                title=f"Readback run {run.public_id} started",
                detail=f"reads the dispute back until it shows the evidence submitted "
                f"(key {run.operation_id})",
                refs=(Ref("run", run.public_id, run.pk),),
            )
        )
        if run.decided_at is not None:
            entries.append(
                TimelineEntry(
                    at=run.decided_at,
                    kind="readback",
                    title=f"Readback run {run.public_id}: {run.verdict}",
                    detail=run.verdict_reason[:200],
                    refs=(Ref("run", run.public_id, run.pk),),
                )
            )
    for reminder in dispute.reminders.select_related("escalation"):
        refs = (Ref("escalation", str(reminder.escalation_id), reminder.escalation_id),)
        entries.append(
            TimelineEntry(
                at=reminder.sent_at,
                kind="reminder",
                title=f"Deadline reminder ({reminder.window} before the deadline)",
                detail="e-mailed to " + (", ".join(reminder.recipients) or "nobody (no address)"),
                refs=refs if reminder.escalation_id else (),
            )
        )
    order = {"webhook": 0, "dispute": 1}
    return sorted(entries, key=lambda e: (e.at, order.get(e.kind, 2)))
