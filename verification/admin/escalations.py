"""The escalations queue and its Resolve action (through `escalation_resolve`, which checks the
permission and the note and writes the audit event)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from accounts.models import User
from core.admin_base import ReadOnlyAdmin, two_lines
from core.links import id_link, link_ids, referring_ids
from verification.admin.shared import verdict_html, worded
from verification.models import (
    Escalation,
    EscalationStatus,
    Notification,
    VerificationRun,
)
from verification.selectors import (
    contract_label,
    subject_type_label,
    verdict_class_label,
    verdict_label,
)
from verification.services import escalation_resolve

PROPOSE_ADJUSTMENT_PERMISSION = "envelopes.add_adjustment"
RESOLVE_PERMISSION = "verification.resolve_escalation"


def _run_link(run: VerificationRun) -> SafeString:
    url = reverse("admin:verification_verificationrun_change", args=[run.pk])
    return format_html('<a href="{}">{}</a>', url, run.public_id)


def verdict_words(verdict: str, verdict_class: str) -> SafeString:
    return verdict_html(verdict, verdict_class)


def subject_words(subject_type: str, subject_id: str) -> SafeString | str:
    """What it is about in words, its id linked (ids stay: they are links)."""
    if not subject_id:
        return subject_type_label(subject_type) or "—"
    return format_html("{} {}", subject_type_label(subject_type), id_link(subject_id))


def escalation_title(escalation: Escalation) -> str:
    """The escalation in a line of words: its verdict, its class and what it is about."""
    said = verdict_label(escalation.verdict).lower()
    if escalation.verdict_class:
        said = f"{said}: {verdict_class_label(escalation.verdict_class).lower()}"
    about = (
        f"run {escalation.run.public_id}"
        if escalation.run is not None
        else f"{subject_type_label(escalation.subject_type)} {escalation.subject_id}".strip()
    )
    return f"Escalation #{escalation.pk}: {said}, on {about}"


class NotificationInline(admin.TabularInline):
    model = Notification
    extra = 0
    fields = ("channel", "recipients", "subject", "created_at", "sent_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ResolveForm(forms.Form):
    # Not required here: `escalation_resolve` is the one judge of an empty note, and its refusal
    # is shown as a message. The browser still asks for one.
    note = forms.CharField(
        required=False,
        label="Resolution note",
        help_text="What was checked and what was done. Kept with the escalation and in the audit.",
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80, "required": True}),
    )


@admin.register(Escalation)
class EscalationAdmin(ReadOnlyAdmin):
    """The queue: open first, oldest first (the model's ordering)."""

    list_display = (
        "id",
        "status",
        "money",
        "verdict_text",
        "short_reason",
        "about",
        "created",
        "resolved_by",
    )
    list_filter = ("status", "money", "verdict")
    list_select_related = ("run", "resolved_by")
    search_fields = ("run__public_id", "run__operation_id", "subject_id")
    fields = (
        "run_link",
        "subject",
        "concerns",
        "money",
        "verdict_text",
        "reason_linked",
        "status",
        "created_at",
        "resolved_at",
        "resolved_by",
        "resolution",
        "resolution_note",
    )
    readonly_fields = fields
    inlines = (NotificationInline,)
    change_form_template = "admin/verification/escalation/change_form.html"
    resolve_template = "admin/verification/escalation/resolve.html"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Escalation) -> SafeString:
        return two_lines(obj.created_at)

    @admin.display(description="verdict", ordering="verdict")
    def verdict_text(self, obj: Escalation) -> SafeString:
        return verdict_words(obj.verdict, obj.verdict_class)

    @admin.display(description="reason")
    def short_reason(self, obj: Escalation) -> str:
        return Truncator(obj.reason).chars(80)

    @admin.display(description="run", ordering="run__public_id")
    def run_link(self, obj: Escalation) -> SafeString | str:
        return _run_link(obj.run) if obj.run is not None else "—"

    @admin.display(description="subject")
    def subject(self, obj: Escalation) -> SafeString | str:
        """What it is about, linked to its page (a leg: its row on its parent's page)."""
        return subject_words(obj.subject_type, obj.subject_id)

    @admin.display(description="concerns")
    def concerns(self, obj: Escalation) -> SafeString | str:
        """The objects other apps say it concerns (its discrepancy, its envelope), linked."""
        found = [(label, value) for label, value in referring_ids(obj) if value != obj.subject_id]
        if not found:
            return "—"
        return format_html_join(
            mark_safe(" · "), "{} {}", ((label, id_link(value)) for label, value in found)
        )

    @admin.display(description="reason")
    def reason_linked(self, obj: Escalation) -> SafeString:
        """The reason as written, every id in it linked to its object."""
        return format_html('<span id="escalation-reason">{}</span>', link_ids(obj.reason))

    @admin.display(description="about")
    def about(self, obj: Escalation) -> SafeString | str:
        if obj.run is not None:
            return _run_link(obj.run)
        return subject_words(obj.subject_type, obj.subject_id)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/resolve/",
                self.admin_site.admin_view(self.resolve_view),
                name="{}_{}_resolve".format(*info),
            ),
            *super().get_urls(),
        ]

    def page_context(self, request: HttpRequest, obj: Escalation | None) -> dict[str, Any]:
        is_open = obj is not None and obj.status == EscalationStatus.OPEN
        money = obj is not None and obj.money
        try:  # the adjustments queue lives in `reconciliation`, above this app
            propose_url = reverse("admin:reconciliation_adjustment_propose")
        except NoReverseMatch:
            propose_url = ""
        return {
            "subtitle": escalation_title(obj) if obj is not None else "",
            "can_resolve": is_open and not money and request.user.has_perm(RESOLVE_PERMISSION),
            "can_propose": is_open
            and money
            and bool(propose_url)
            and request.user.has_perm(PROPOSE_ADJUSTMENT_PERMISSION),
            "propose_url": propose_url,
            "adjustments": [
                (adjustment, worded(adjustment.get_status_display(), adjustment.status))
                for adjustment in (obj.adjustments.select_related("proposed_by") if obj else [])
            ],
        }

    def resolve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        user = request.user
        if not isinstance(user, User) or not user.has_perm(RESOLVE_PERMISSION):
            raise PermissionDenied
        escalation = self.get_object(request, unquote(object_id))
        if escalation is None:
            raise Http404(f"no escalation {object_id!r}")
        form = ResolveForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                escalation = escalation_resolve(
                    escalation=escalation, actor=user, note=form.cleaned_data["note"]
                )
            except PermissionError as exc:
                raise PermissionDenied(str(exc)) from exc
            except ValueError as exc:
                self.message_user(request, f"Not resolved: {exc}.", messages.ERROR)
                escalation.refresh_from_db()
            else:
                about = (
                    f"run {escalation.run.public_id}"
                    if escalation.run is not None
                    else f"{subject_type_label(escalation.subject_type)} {escalation.subject_id}"
                )
                self.message_user(
                    request,
                    f"Escalation #{escalation.pk} on {about} is resolved.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(
                    reverse(
                        "admin:verification_escalation_change",
                        args=[escalation.pk],
                        current_app=self.admin_site.name,
                    )
                )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Resolve escalation #{escalation.pk}",
            "subtitle": None,
            "opts": self.opts,
            "escalation": escalation,
            "run": escalation.run,
            "verdict_html": verdict_words(escalation.verdict, escalation.verdict_class),
            "subject_html": subject_words(escalation.subject_type, escalation.subject_id),
            "contract_title": contract_label(escalation.run.contract_id) if escalation.run else "",
            "form": form,
            "has_view_permission": self.has_view_permission(request, escalation),
        }
        return TemplateResponse(request, self.resolve_template, context)
