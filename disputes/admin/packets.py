"""Packet versions and their review page, with its four acts: Approve, File, Edit, Prepare again,
each a POST of its own that calls one service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import exceptions as core_errors
from core.admin_base import two_lines
from disputes.admin.common import (
    PERM_EDIT,
    PacketQueueFilter,
    _acting_user,
    _can_review,
    _DisputesAdmin,
    approval_label,
    filing_label,
    review_url,
)
from disputes.admin.review import compliance_fee_text, packet_page_context
from disputes.forms import ApproveForm, EditForm, FileForm, short_digest
from disputes.models import (
    FilingStatus,
    Packet,
    ProviderStatus,
)
from disputes.selectors import posture_label
from disputes.services import (
    PERM_APPROVE,
    PERM_FILE,
    appeal_prepare,
    filing_key_proposal,
    packet_approve,
    packet_edit,
    packet_file,
    packet_prepare,
)


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
        "created",
    )
    list_display_links = None
    list_filter = (PacketQueueFilter, "status", "posture", "approval_status", "filing_status")
    list_select_related = ("dispute",)
    search_fields = ("public_id", "dispute__provider_dispute_id", "dispute__charge_id")
    review_template = "admin/disputes/packet/review.html"

    @admin.display(description="packet", ordering="public_id")
    def review(self, obj: Packet) -> SafeString:
        return format_html('<a href="{}">{}</a>', review_url(obj), obj.public_id)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Packet) -> SafeString:
        return two_lines(obj.created_at)

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
            ("appeal", self.appeal_view),
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
        # The sentence for the person; the stable code stays, as details.
        self.message_user(request, f"{what}: {exc.message} (details: {exc.code})", messages.ERROR)

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
        form = ApproveForm(request.POST, packet=packet, fee=compliance_fee_text(packet))
        if not form.is_valid():
            self.message_user(
                request,
                "Not approved: tick the confirmation to approve the digest "
                f"{short_digest(packet.digest)}. (details: confirmation_required)",
                messages.ERROR,
            )
            return self._back(packet)
        try:
            approved = packet_approve(
                packet=packet,
                actor=user,
                confirmed_digest=form.cleaned_data["digest"],
                fee_acknowledged=bool(form.cleaned_data.get("acknowledge_fee")),
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
                request,
                f"Not filed: {problem}. (details: confirmation_required)",
                messages.ERROR,
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
            self.message_user(
                request, f"Not edited: {problems} (details: validation_error)", messages.ERROR
            )
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
            + " ".join(e.get("message", "") for e in edited.validation.get("errors", []))
            + " (details: "
            + ", ".join(e.get("code", "") for e in edited.validation.get("errors", []))
            + ")"
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
        # A version changes the packet: the API and MCP ask the same (disputes.permissions).
        user = _acting_user(request, PERM_EDIT)
        packet = self._packet(object_id)
        try:
            prepared = packet_prepare(dispute=packet.dispute, requested_by=user)
        except core_errors.VouchError as exc:
            self._refused(request, "Not prepared", exc)
            return self._back(packet)
        self.message_user(
            request,
            f"Version {prepared.version} is prepared: {posture_label(prepared.posture)}, "
            f"{prepared.get_status_display().lower()}. You contributed to it and cannot approve "
            "it.",
            messages.SUCCESS,
        )
        return self._back(prepared)

    def appeal_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Prepare an appeal of the lost dispute this filed response answered (SPEC §17)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = _acting_user(request, PERM_EDIT)  # as prepare_view: a version changes the packet
        packet = self._packet(object_id)
        try:
            prepared = appeal_prepare(dispute=packet.dispute, requested_by=user)
        except core_errors.VouchError as exc:
            self._refused(request, "No appeal prepared", exc)
            return self._back(packet)
        self.message_user(
            request,
            f"Appeal version {prepared.version} is prepared, "
            f"{prepared.get_status_display().lower()}. You contributed to it and cannot approve "
            "it; it is filed only while the provider shows the dispute awaiting its appeal.",
            messages.SUCCESS if prepared.status == "ready_for_review" else messages.WARNING,
        )
        return self._back(prepared)
