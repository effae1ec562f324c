"""Disputes, deadline first, each with its current packet's state, its evidence, its versions and
its timeline; evidence is admitted through the one admission service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import URLPattern, path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

from core import exceptions as core_errors
from core.dashboard import stripe_link
from core.display import money
from disputes.admin.common import (
    PERM_ADMIT,
    DisputeQueueFilter,
    _acting_user,
    _DisputesAdmin,
    approval_label,
    evidence_file_url,
    filing_label,
    review_url,
)
from disputes.admin.review import timeline_rows
from disputes.forms import EvidenceForm
from disputes.models import (
    Dispute,
    Packet,
    PacketStatus,
)
from disputes.selectors import (
    packet_current,
    posture_label,
    provider_status_label,
    reason_label,
    response_deadline_note,
)
from disputes.services import evidence_admit
from envelopes.selectors import dispute_funds_of


def _current_packet(field: str) -> Subquery:
    return Subquery(
        Packet.objects.filter(dispute=OuterRef("pk")).order_by("-version").values(field)[:1]
    )


@admin.register(Dispute)
class DisputeAdmin(_DisputesAdmin):
    """Deadline first, disputes without one last (the model's ordering)."""

    list_display = (
        "provider_dispute_id",
        "charge_id",
        "amount",
        "reason_words",
        "deadline",
        "source",
        "current_packet",
    )
    list_filter = (DisputeQueueFilter,)
    search_fields = ("provider_dispute_id", "charge_id")
    fields = (
        "public_id",
        "provider",
        "provider_dispute",
        "charge",
        "amount_money",
        "currency",
        "reason_words",
        "deadline",
        "status_at_stripe",
        "case_type",
        "is_charge_refundable",
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

    @admin.display(description="amount")
    def amount_money(self, obj: Dispute) -> SafeString:
        """On the dispute's page: `$10.00`, the micro-dollars in its title and beside it."""
        return format_html(
            '{} <span class="vouch-quiet">({} micro-dollars)</span>',
            money(obj.amount_micro),
            f"{obj.amount_micro:,}",
        )

    @admin.display(description="amount", ordering="amount_micro")
    def amount(self, obj: Dispute) -> SafeString | str:
        """In the list: `$10.00`, the micro-dollars in its title."""
        return money(obj.amount_micro)

    @admin.display(description="response deadline", ordering="response_deadline")
    def deadline(self, obj: Dispute) -> SafeString | str:
        """The deadline, or why there is none: the card network allows no response (Stripe's
        `due_by` 0), or none is known."""
        if obj.response_deadline is not None:
            return date_format(localtime(obj.response_deadline), "DATETIME_FORMAT")
        return format_html(
            '<span class="vouch-quiet vouch-no-deadline">{}</span>', response_deadline_note(obj)
        )

    @admin.display(description="reason", ordering="reason")
    def reason_words(self, obj: Dispute) -> SafeString:
        """Stripe's reason in words, its code beside it."""
        return format_html(
            '{} <span class="vouch-quiet vouch-mono">{}</span>',
            reason_label(obj.reason),
            obj.reason,
        )

    @admin.display(description="at Stripe now")
    def status_at_stripe(self, obj: Dispute) -> SafeString:
        """Stripe's status of the dispute in words, the code as details."""
        return format_html(
            '{} <span class="vouch-quiet">(details: <span class="vouch-mono">{}</span>)</span>',
            provider_status_label(obj.provider_status),
            obj.provider_status or "none",
        )

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
            posture_label(obj.current_posture),
            PacketStatus(obj.current_status).label
            if obj.current_status in PacketStatus.values
            else obj.current_status,
            approval_label(obj.current_approval, obj.current_digest, obj.current_approved_digest),
            filing_label(obj.current_filing),
            reverse("admin:disputes_packet_review", args=[obj.current_packet_pk]),
        )

    def page_context(self, request: HttpRequest, obj: Dispute | None) -> dict[str, Any]:
        if obj is None:
            return {}
        can_admit = request.user.has_perm(PERM_ADMIT)
        funds = dispute_funds_of(obj.provider_dispute_id)
        return {
            # The money it took (SPEC §18): held, exposure, charged back; a link for those who
            # may see the funds' own page.
            "funds": funds,
            "funds_url": reverse("admin:envelopes_disputefunds_change", args=[funds.pk])
            if funds is not None and request.user.has_perm("envelopes.view_disputefunds")
            else None,
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
                    posture_label(packet.posture),
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
                request, f"Not admitted: {problems} (details: validation_error)", messages.ERROR
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
            # The sentence for the person; the stable code stays, as details (issue 41).
            self.message_user(
                request, f"Not admitted: {exc.message} (details: {exc.code})", messages.ERROR
            )
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
