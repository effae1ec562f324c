"""The ops staff's view of disputes (SPEC §10): disputes deadline first with their current
packet's state, each dispute with its evidence and packet versions, and the packet review page
with its four acts: Approve, File, Edit, Prepare again.

Nothing here is edited through a generic form: every act is a POST of its own, checked for its
permission before anything is looked up, and calls one service (`disputes.services`), which is the
judge; a refusal is shown with its stable code. What this module adds is presentation: links to
receipts, evidence and verification runs, the digest being acted on, and wording that never claims
more than the readback proved (a filed packet is `filed (readback verified)`, nothing more)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import content_disposition_header
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from accounts.models import User
from core import exceptions as core_errors
from core.admin_base import ReadOnlyAdmin
from core.dashboard import stripe_link
from disputes.evidence import FILE_CONTENT_TYPES
from disputes.forms import ApproveForm, EditForm, EvidenceForm, FileForm, short_digest
from disputes.models import (
    FILING_HOLDS,
    ApprovalStatus,
    Dispute,
    Evidence,
    FilingStatus,
    Packet,
    PacketStatus,
    ProviderStatus,
)
from disputes.packets import packet_budget
from disputes.selectors import Ref, TimelineEntry, dispute_timeline, packet_current
from disputes.services import (
    PERM_APPROVE,
    PERM_FILE,
    evidence_admit,
    evidence_file_bytes,
    filing_key_proposal,
    packet_approve,
    packet_edit,
    packet_file,
    packet_prepare,
)
from envelopes.admin import dollars, micro
from verification.admin import VERDICT_TONES, pretty_json
from verification.models import VerificationRun

PERM_EDIT = "disputes.change_packet"
PERM_ADMIT = "disputes.add_evidence"
# Whoever may approve or file a packet must be able to read it first.
REVIEW_PERMISSIONS = ("disputes.view_packet", PERM_EDIT, PERM_APPROVE, PERM_FILE)

# Labels that claim no more than Vouch can prove: the provider's answer is a claim, and only the
# readback run makes a filing `filed`. Never "accepted", "won" or "closed".
FILING_LABELS: dict[str, str] = {
    FilingStatus.NOT_FILED: "not filed",
    FilingStatus.SUBMITTING: "submitting (the provider is being called, or its answer is unknown)",
    FilingStatus.AWAITING_READBACK: "awaiting readback (the provider answered; not yet proven)",
    FilingStatus.FILED: "filed (readback verified)",
    FilingStatus.READBACK_FAILED: (
        "readback failed (not proven filed; the provider shows a submission: a person resolves it)"
    ),
    FilingStatus.NOT_SUBMITTED: (
        "not submitted (the readback shows nothing submitted: prepare and approve a new version)"
    ),
}
FILING_TONES: dict[str, str] = {
    FilingStatus.NOT_FILED: "neutral",
    FilingStatus.SUBMITTING: "warn",
    FilingStatus.AWAITING_READBACK: "warn",
    FilingStatus.FILED: "good",
    FilingStatus.READBACK_FAILED: "bad",
    FilingStatus.NOT_SUBMITTED: "bad",
}
PROVIDER_LABELS: dict[str, str] = {
    ProviderStatus.NOT_CALLED: "not called",
    ProviderStatus.ANSWERED: "answered with the dispute (a claim: the readback decides)",
    ProviderStatus.REFUSED: "refused the request (the readback decides what was filed)",
    ProviderStatus.UNKNOWN: "no answer (unknown: the readback decides)",
}
STATUS_TONES: dict[str, str] = {
    PacketStatus.READY_FOR_REVIEW: "good",
    PacketStatus.INCOMPLETE: "warn",
    PacketStatus.INVALID: "bad",
    PacketStatus.SUPERSEDED: "neutral",
    PacketStatus.FILED: "good",
}


def receipt_url(receipt_id: str) -> str:
    """The receipt's admin page, or "" where the receipts admin is not installed. The id is
    quoted as the admin quotes keys: unquoted, `rcpt_22…` would be read back as `rcpt"…`."""
    try:
        return reverse("admin:receipts_receipt_change", args=[quote(receipt_id)])
    except NoReverseMatch:
        return ""


def review_url(packet: Packet) -> str:
    return reverse("admin:disputes_packet_review", args=[packet.pk])


def filing_label(status: str) -> str:
    return FILING_LABELS.get(status, status)


def approval_label(status: str, digest: str, approved_digest: str) -> str:
    if status != ApprovalStatus.APPROVED:
        return "not approved"
    return "approved" if approved_digest == digest else "approved, DRIFTED since"


def _amount(value: int) -> SafeString:
    return format_html('{}<br><span class="vouch-quiet">{}</span>', micro(value), dollars(value))


def _can_review(user: Any) -> bool:
    return bool(getattr(user, "is_staff", False)) and any(
        user.has_perm(p) for p in REVIEW_PERMISSIONS
    )


def _can_read_evidence(user: Any) -> bool:
    """Evidence files are served to whoever may read disputes: the evidence view permission or
    any permission that reads packets."""
    return _can_review(user) or (
        bool(getattr(user, "is_staff", False)) and user.has_perm("disputes.view_evidence")
    )


def evidence_file_url(evidence: Evidence) -> str:
    """The admin view that streams an evidence file, or "" for evidence without one."""
    if not evidence.file:
        return ""
    return reverse("admin:disputes_evidence_file", args=[evidence.pk])


def _acting_user(request: HttpRequest, permission: str | None) -> User:
    """The staff member asking, if they hold `permission`: checked before anything is looked up."""
    user = request.user
    if not isinstance(user, User) or not user.is_staff:
        raise PermissionDenied
    if permission is not None and not user.has_perm(permission):
        raise PermissionDenied
    return user


# --- the review page --------------------------------------------------------------------------


@dataclass(frozen=True)
class CitationRow:
    citation: str
    kind: str  # "receipt", "evidence", or "not admitted"
    url: str  # the receipt's admin page
    evidence: dict[str, Any] | None  # {ref, sha256, kind, summary} for an evidence ref


def citation_rows(packet: Packet) -> list[CitationRow]:
    evidence = {str(e.get("ref")): e for e in packet.evidence_refs if isinstance(e, dict)}
    rows = []
    for citation in packet.citations:
        if citation.startswith("rcpt_"):
            rows.append(CitationRow(citation, "receipt", receipt_url(citation), None))
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
    not_filing = not any(v.filing_status in FILING_HOLDS for v in versions)
    approved = packet.approval_status == ApprovalStatus.APPROVED
    drifted = approved and packet.approved_digest != packet.digest
    live = packet.status != PacketStatus.SUPERSEDED and packet.filing_status == (
        FilingStatus.NOT_FILED
    )
    contributors = list(packet.contributors.order_by("username"))
    run = packet.filing_run
    can_approve = live and (not approved or drifted) and user.has_perm(PERM_APPROVE)
    can_file = live and approved and not_filing and user.has_perm(PERM_FILE)
    can_edit = live and user.has_perm(PERM_EDIT)
    proposed_key = filing_key_proposal(packet)
    citations = set(packet.citations)
    rows = {e.ref: e for e in dispute.evidence.all()}
    budget = packet_budget(packet)
    return {
        "packet": packet,
        "dispute": dispute,
        "current": current,
        "versions": [(v, review_url(v)) for v in versions],
        "status_tone": STATUS_TONES.get(packet.status, "neutral"),
        "amount": f"{micro(dispute.amount_micro)} micro ({dollars(dispute.amount_micro)})",
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
        "can_prepare": not_filing,
        "approve_form": ApproveForm(packet=packet) if can_approve else None,
        "file_form": FileForm(packet=packet, proposed_key=proposed_key) if can_file else None,
        "edit_form": EditForm(packet=packet) if can_edit else None,
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


# --- disputes ---------------------------------------------------------------------------------


def _current_packet(field: str) -> Subquery:
    return Subquery(
        Packet.objects.filter(dispute=OuterRef("pk")).order_by("-version").values(field)[:1]
    )


class _DisputesAdmin(ReadOnlyAdmin):
    """Readable by whoever may read, approve or file packets."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or _can_review(request.user)


@admin.register(Dispute)
class DisputeAdmin(_DisputesAdmin):
    """Deadline first, disputes without one last (the model's ordering)."""

    list_display = (
        "provider_dispute_id",
        "charge_id",
        "amount",
        "reason",
        "response_deadline",
        "source",
        "current_packet",
    )
    search_fields = ("provider_dispute_id", "charge_id")
    fields = (
        "public_id",
        "provider",
        "provider_dispute",
        "charge",
        "amount",
        "currency",
        "reason",
        "response_deadline",
        "provider_status",
        "source",
        "entered_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    change_form_template = "admin/disputes/dispute/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Dispute]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                current_packet_pk=_current_packet("pk"),
                current_posture=_current_packet("posture"),
                current_status=_current_packet("status"),
                current_approval=_current_packet("approval_status"),
                current_digest=_current_packet("digest"),
                current_approved_digest=_current_packet("approved_digest"),
                current_filing=_current_packet("filing_status"),
            )
        )

    @admin.display(description="amount", ordering="amount_micro")
    def amount(self, obj: Dispute) -> SafeString:
        return _amount(obj.amount_micro)

    @admin.display(description="provider dispute id")
    def provider_dispute(self, obj: Dispute) -> SafeString | str:
        return stripe_link(obj.provider_dispute_id)

    @admin.display(description="charge id")
    def charge(self, obj: Dispute) -> SafeString | str:
        return stripe_link(obj.charge_id)

    @admin.display(description="current packet", ordering="current_status")
    def current_packet(self, obj: Any) -> SafeString | str:
        """Posture and status, approval and filing, and the way to the review page."""
        if obj.current_packet_pk is None:
            return "—"
        return format_html(
            '<strong>{}</strong> · {}<br>{} · {}<br><a href="{}" class="vouch-review">Review…</a>',
            obj.current_posture,
            obj.current_status,
            approval_label(obj.current_approval, obj.current_digest, obj.current_approved_digest),
            filing_label(obj.current_filing),
            reverse("admin:disputes_packet_review", args=[obj.current_packet_pk]),
        )

    def page_context(self, request: HttpRequest, obj: Dispute | None) -> dict[str, Any]:
        if obj is None:
            return {}
        can_admit = request.user.has_perm(PERM_ADMIT)
        return {
            "evidence": [
                (e, evidence_file_url(e)) for e in obj.evidence.select_related("admitted_by")
            ],
            "evidence_form": EvidenceForm() if can_admit else None,
            "timeline": timeline_rows(obj),
            "versions": [
                (
                    packet,
                    review_url(packet),
                    approval_label(packet.approval_status, packet.digest, packet.approved_digest),
                    filing_label(packet.filing_status),
                )
                for packet in obj.packets.order_by("-version")
            ],
        }

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/evidence/",
                self.admin_site.admin_view(self.admit_view),
                name="{}_{}_admit".format(*info),
            ),
            *super().get_urls(),
        ]

    def admit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Admit evidence (with a file or a SHA-256) to this dispute through the one service."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, PERM_ADMIT)
        pk = unquote(object_id)
        dispute = Dispute.objects.filter(pk=pk).first() if pk.isdigit() else None
        if dispute is None:
            raise Http404(f"no dispute {object_id!r}")
        back = HttpResponseRedirect(
            reverse("admin:disputes_dispute_change", args=[dispute.pk]) + "#dispute-evidence"
        )
        form = EvidenceForm(request.POST, request.FILES)
        if not form.is_valid():
            problems = "; ".join(
                f"{name}: {' '.join(str(m) for m in e)}" for name, e in form.errors.items()
            )
            self.message_user(
                request, f"Not admitted: validation_error: {problems}", messages.ERROR
            )
            return back
        upload = form.cleaned_data["file"]
        file = None
        if upload is not None:
            # One byte past the limit is enough to refuse it: nothing larger is read.
            limit = int(settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES)
            file = (str(upload.name), upload.read(limit + 1))
        try:
            evidence, created = evidence_admit(
                dispute=dispute, actor=user, data=form.data_for_service(), file=file
            )
        except core_errors.VouchError as exc:
            if isinstance(exc, core_errors.PermissionDenied):
                raise PermissionDenied(exc.message) from exc
            self.message_user(request, f"Not admitted: {exc.code}: {exc.message}", messages.ERROR)
            return back
        current = packet_current(dispute)
        if not created:
            text = (
                f"Evidence {evidence.ref} was already admitted with this content: nothing changed."
            )
        else:
            text = (
                f"Evidence {evidence.ref} is admitted ({evidence.kind}, sha256 {evidence.sha256})"
            )
            if evidence.file:
                text += f", file {evidence.file_name} ({evidence.file_size:,} bytes)"
            text += (
                f". The current packet is version {current.version}; you contributed to any "
                "version holding this evidence and cannot approve it."
                if current is not None
                else "."
            )
        self.message_user(request, text, messages.SUCCESS)
        return back


@admin.register(Evidence)
class EvidenceAdmin(_DisputesAdmin):
    """Read-only: evidence is admitted only through the API (POST /api/v1/disputes/{id}/evidence),
    under the admission rules."""

    list_display = ("ref", "kind", "short_sha256", "short_summary", "dispute", "admitted_by")
    list_filter = ("kind",)
    list_select_related = ("dispute", "admitted_by")
    search_fields = ("ref", "sha256", "dispute__provider_dispute_id", "dispute__charge_id")
    fields = (
        "dispute",
        "ref",
        "kind",
        "sha256",
        "summary",
        "evidence_file",
        "admitted_by",
        "admitted_at",
    )
    readonly_fields = fields

    @admin.display(description="file")
    def evidence_file(self, obj: Evidence) -> SafeString | str:
        url = evidence_file_url(obj)
        if not url:
            return "—"
        return format_html(
            '<a href="{}" class="vouch-evidence-file">{}</a> <span class="vouch-quiet">({} bytes, '
            "{})</span>",
            url,
            obj.file_name,
            f"{obj.file_size or 0:,}",
            obj.file_type,
        )

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/file/",
                self.admin_site.admin_view(self.file_view),
                name="{}_{}_file".format(*info),
            ),
            *super().get_urls(),
        ]

    def file_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Stream an evidence file to whoever may read disputes, after checking that its bytes
        are still the ones admitted (a file altered in storage is not served as evidence)."""
        user = _acting_user(request, None)
        if not _can_read_evidence(user):
            raise PermissionDenied
        pk = unquote(object_id)
        evidence = Evidence.objects.filter(pk=pk).first() if pk.isdigit() else None
        if evidence is None or not evidence.file:
            raise Http404("no such evidence file")
        content = evidence_file_bytes(evidence)
        if content is None:
            return HttpResponse(
                "This evidence file is missing from storage or no longer matches its SHA-256.",
                status=410,
                content_type="text/plain; charset=utf-8",
            )
        response = HttpResponse(
            content,
            content_type=FILE_CONTENT_TYPES.get(evidence.file_type, "application/octet-stream"),
        )
        disposition = content_disposition_header(
            as_attachment=False, filename=evidence.file_name or evidence.public_id
        )
        if disposition:
            response["Content-Disposition"] = disposition
        response["Cache-Control"] = "private, no-store"
        response["X-Content-Type-Options"] = "nosniff"
        return response

    @admin.display(description="sha256")
    def short_sha256(self, obj: Evidence) -> str:
        return short_digest(obj.sha256)

    @admin.display(description="summary")
    def short_summary(self, obj: Evidence) -> str:
        return Truncator(obj.summary).chars(80)


# --- packets ----------------------------------------------------------------------------------


@admin.register(Packet)
class PacketAdmin(_DisputesAdmin):
    """Packets are never edited through a generic form: each opens on its review page."""

    list_display = (
        "review",
        "dispute",
        "version",
        "posture",
        "status",
        "approval",
        "filing",
        "created_at",
    )
    list_display_links = None
    list_filter = ("status", "posture", "approval_status", "filing_status")
    list_select_related = ("dispute",)
    search_fields = ("public_id", "dispute__provider_dispute_id", "dispute__charge_id")
    review_template = "admin/disputes/packet/review.html"

    @admin.display(description="packet", ordering="public_id")
    def review(self, obj: Packet) -> SafeString:
        return format_html('<a href="{}">{}</a>', review_url(obj), obj.public_id)

    @admin.display(description="approval", ordering="approval_status")
    def approval(self, obj: Packet) -> str:
        return approval_label(obj.approval_status, obj.digest, obj.approved_digest)

    @admin.display(description="filing", ordering="filing_status")
    def filing(self, obj: Packet) -> str:
        return filing_label(obj.filing_status)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        views: list[tuple[str, Callable[[HttpRequest, str], HttpResponse]]] = [
            ("review", self.review_view),
            ("approve", self.approve_view),
            ("file", self.file_view),
            ("edit", self.edit_view),
            ("prepare", self.prepare_view),
        ]
        return [
            *(
                path(
                    f"<path:object_id>/{name}/",
                    self.admin_site.admin_view(view),
                    name="{}_{}_{}".format(*info, name),
                )
                for name, view in views
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return HttpResponseRedirect(
            reverse("admin:disputes_packet_review", args=[unquote(object_id)])
        )

    def _packet(self, object_id: str) -> Packet:
        pk = unquote(object_id)
        packet = (
            Packet.objects.select_related(
                "dispute", "requested_by", "last_edited_by", "approved_by", "filed_by", "filing_run"
            )
            .filter(pk=pk)
            .first()
            if pk.isdigit()
            else None
        )
        if packet is None:
            raise Http404(f"no packet {object_id!r}")
        return packet

    def _back(self, packet: Packet) -> HttpResponseRedirect:
        return HttpResponseRedirect(review_url(packet))

    def _refused(self, request: HttpRequest, what: str, exc: core_errors.VouchError) -> None:
        if isinstance(exc, core_errors.PermissionDenied):
            raise PermissionDenied(exc.message) from exc
        self.message_user(request, f"{what}: {exc.code}: {exc.message}", messages.ERROR)

    def review_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        user = _acting_user(request, None)
        if not _can_review(user):
            raise PermissionDenied
        packet = self._packet(object_id)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Review packet {packet.public_id} (version {packet.version})",
            "subtitle": None,
            "opts": self.opts,
            "has_view_permission": True,
            **packet_page_context(packet, user),
        }
        return TemplateResponse(request, self.review_template, context)

    def approve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, PERM_APPROVE)
        packet = self._packet(object_id)
        form = ApproveForm(request.POST, packet=packet)
        if not form.is_valid():
            self.message_user(
                request,
                "Not approved: confirmation_required: tick the confirmation to approve the "
                f"digest {short_digest(packet.digest)}.",
                messages.ERROR,
            )
            return self._back(packet)
        try:
            approved = packet_approve(
                packet=packet, actor=user, confirmed_digest=form.cleaned_data["digest"]
            )
        except core_errors.VouchError as exc:
            self._refused(request, "Not approved", exc)
        else:
            self.message_user(
                request,
                f"Packet {approved.public_id} (version {approved.version}) is approved by "
                f"{user.get_username()} with digest {approved.approved_digest}.",
                messages.SUCCESS,
            )
        return self._back(packet)

    def file_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, PERM_FILE)
        packet = self._packet(object_id)
        form = FileForm(request.POST, packet=packet, proposed_key=filing_key_proposal(packet))
        if not form.is_valid():
            problem = (
                "tick the confirmation to file the digest " + short_digest(packet.digest)
                if "confirm" in form.errors
                else "give the filing's idempotency key (1-255 characters)"
            )
            self.message_user(
                request, f"Not filed: confirmation_required: {problem}.", messages.ERROR
            )
            return self._back(packet)
        try:
            filed = packet_file(
                packet=packet,
                actor=user,
                confirmed_digest=form.cleaned_data["digest"],
                idempotency_key=form.cleaned_data["idempotency_key"],
            )
        except core_errors.VouchError as exc:
            self._refused(request, "Not filed", exc)
            return self._back(packet)
        self._filing_message(request, filed)
        return self._back(packet)

    def _filing_message(self, request: HttpRequest, packet: Packet) -> None:
        run = packet.filing_run.public_id if packet.filing_run else "(none)"
        decides = f"The readback run {run} decides whether the packet is filed."
        if packet.filing_status == FilingStatus.FILED:
            text = f"Packet {packet.public_id} is {filing_label(FilingStatus.FILED)}."
            level = messages.SUCCESS
        elif packet.filing_status == FilingStatus.SUBMITTING:
            text = (
                f"Not sent yet: an evidence file's upload got no answer ({packet.filing_error}). "
                f"The filing resumes with the same keys (key {packet.filing_key}); nothing can "
                "be submitted twice."
            )
            level = messages.WARNING
        elif packet.provider_status == ProviderStatus.REFUSED:
            text = (
                f"The provider refused filing key {packet.filing_key} ({packet.filing_error}). "
                "A refusal is not proof that nothing was submitted, so nothing more is sent for "
                f"this approval, with this key or another. {decides} If it shows nothing "
                "submitted, this version is done: prepare a new version, have it approved and "
                "file that."
            )
            level = messages.ERROR
        elif packet.filing_error == "key_expired":
            text = (
                f"Not sent again: filing key {packet.filing_key} is older than the provider keeps "
                "keys, so a repeat would not be replayed (a second submission is refused). "
                f"{decides}"
            )
            level = messages.WARNING
        elif packet.filing_error.startswith("refused_on_resume:"):
            text = (
                f"The provider refused this repeat of filing key {packet.filing_key} "
                f"({packet.filing_error.removeprefix('refused_on_resume:')}), which says nothing "
                f"of the earlier send. {decides}"
            )
            level = messages.WARNING
        elif packet.provider_status == ProviderStatus.ANSWERED:
            text = (
                f"Sent to the provider with key {packet.filing_key}; it answered, which is a "
                f"claim, not proof. {decides}"
            )
            level = messages.SUCCESS
        else:
            text = (
                f"Sent to the provider with key {packet.filing_key}; no answer came "
                f"({packet.filing_error or 'unknown'}). {decides}"
            )
            level = messages.WARNING
        self.message_user(request, text, level)

    def edit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, PERM_EDIT)
        packet = self._packet(object_id)
        form = EditForm(request.POST, packet=packet)
        if not form.is_valid():
            problems = "; ".join(
                f"{name}: {' '.join(str(m) for m in e)}" for name, e in form.errors.items()
            )
            self.message_user(request, f"Not edited: validation_error: {problems}", messages.ERROR)
            return self._back(packet)
        try:
            changes = form.changes()
            if not changes:
                self.message_user(request, "Nothing changed.", messages.INFO)
                return self._back(packet)
            edited = packet_edit(
                packet=packet,
                actor=user,
                changes=changes,
                confirmed_digest=form.cleaned_data["digest"],
            )
        except core_errors.VouchError as exc:
            self._refused(request, "Not edited", exc)
            return self._back(packet)
        outcome = (
            "validation ok"
            if edited.validation.get("ok")
            else "validation failed: "
            + ", ".join(e.get("code", "") for e in edited.validation.get("errors", []))
        )
        self.message_user(
            request,
            f"Edited {', '.join(sorted(changes))}: the digest is now {edited.digest} "
            f"({outcome}). You contributed to this version and cannot approve it.",
            messages.SUCCESS if edited.validation.get("ok") else messages.WARNING,
        )
        return self._back(edited)

    def prepare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, None)  # any staff may ask for a new version
        packet = self._packet(object_id)
        try:
            prepared = packet_prepare(dispute=packet.dispute, requested_by=user)
        except core_errors.VouchError as exc:
            self._refused(request, "Not prepared", exc)
            return self._back(packet)
        self.message_user(
            request,
            f"Version {prepared.version} is prepared: {prepared.posture}, "
            f"{prepared.get_status_display().lower()}. You contributed to it and cannot approve "
            "it.",
            messages.SUCCESS,
        )
        return self._back(prepared)
