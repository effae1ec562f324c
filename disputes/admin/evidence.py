"""Admitted evidence, read-only, and its files streamed to whoever may read disputes."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.urls import URLPattern, path
from django.utils.html import format_html
from django.utils.http import content_disposition_header
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from disputes.admin.common import (
    _acting_user,
    _can_read_evidence,
    _DisputesAdmin,
    evidence_file_url,
)
from disputes.evidence import FILE_CONTENT_TYPES
from disputes.forms import short_digest
from disputes.models import Evidence
from disputes.services import evidence_file_bytes


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
