"""The discrepancy queue in the admin (open first, by severity, then age, with the time left to
each one's target; CSV export) and a discrepancy's page: Vouch's side and the provider's next to
each other, the observations behind it, and its actions."""

from __future__ import annotations

import csv
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from accounts.models import User
from core import display
from core.admin_base import ReadOnlyAdmin
from core.display import micro_text
from core.exceptions import VouchError
from core.links import id_link
from envelopes.adjustments import APPROVE_PERMISSION, PROPOSE_PERMISSION
from envelopes.admin import dollars
from envelopes.admin.words import leg_state_words
from envelopes.models import AdjustmentKind, AdjustmentStatus
from reconciliation.admin.shared import (
    MOVES,
    SEVERITY_TONES,
    STATUS_TONES,
    _cell,
    _envelope_url,
    _FormError,
    _url,
    badge,
    provider_id,
    time_left,
    when,
)
from reconciliation.models import Discrepancy, DiscrepancyClass, DiscrepancyStatus, Severity
from reconciliation.selectors import (
    QUEUE_ORDER,
    class_label,
    discrepancies_overdue,
    discrepancies_within_target,
    discrepancy_correction,
    discrepancy_export_rows,
    discrepancy_history,
    discrepancy_queue,
    discrepancy_sides,
    history_label,
    severity_label,
    status_label,
)
from reconciliation.services import (
    WORK_PERMISSION,
    discrepancy_accept,
    discrepancy_acknowledge,
    discrepancy_adjustment_propose,
)
from verification.admin import worded
from verification.selectors import subject_type_label


class TargetFilter(admin.SimpleListFilter):
    title = "time to target"
    parameter_name = "target"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("overdue", "Overdue"), ("within", "Within target")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "overdue":
            return discrepancies_overdue(queryset, now=timezone.now())
        if self.value() == "within":
            return discrepancies_within_target(queryset, now=timezone.now())
        return queryset


class ClassFilter(admin.SimpleListFilter):
    """By class, in words; the query string keeps its stable code (the codes the runs, the CSV
    and the runbooks use)."""

    title = "class"
    parameter_name = "class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return sorted(
            ((code, class_label(code)) for code in DiscrepancyClass.values), key=lambda x: x[1]
        )

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(code=self.value()) if self.value() else queryset


class AcceptForm(forms.Form):
    # Not required here: `discrepancy_accept` is the one judge of an empty note, and its refusal
    # is shown as a message. The browser still asks for one.
    note = forms.CharField(
        required=False,
        label="Note",
        help_text="Why the difference is acceptable as it stands. Kept with it and in the audit.",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "required": True}),
    )


class DiscrepancyProposeForm(forms.Form):
    """Parses any known kind (the adjustment service judges whether it fits the leg); rendered
    with only the kinds that fit it now."""

    kind = forms.ChoiceField(label="Correction", choices=AdjustmentKind.choices)
    provider_object_id = forms.CharField(
        required=False,
        max_length=100,
        label="Provider object",
        widget=forms.TextInput(attrs={"size": 40}),
        help_text="The provider refund (re_…) or PaymentIntent (pi_…) the correction rests on, "
        "when it names one. It is read from the provider now and again at approval.",
    )
    reason = forms.CharField(
        required=False,
        label="Reason",
        help_text="What you checked (e.g. in the Stripe Dashboard) and why this corrects it.",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "required": True}),
    )

    def __init__(
        self, *args: Any, kinds: list[AdjustmentKind] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        kind = self.fields["kind"]
        if kinds is not None and isinstance(kind, forms.ChoiceField):
            kind.choices = [(k.value, k.label) for k in kinds]


@admin.register(Discrepancy)
class DiscrepancyAdmin(ReadOnlyAdmin):
    """The queue: open (and acknowledged) first, then money, evidence, hygiene, then the oldest
    first (`reconciliation.selectors.discrepancy_queue`)."""

    list_display = (
        "class_code",
        "severity_badge",
        "subject",
        "short_summary",
        "amount",
        "first_seen",
        "seen",
        "status_label",
        "time_left",
    )
    list_display_links = ("class_code",)
    list_filter = ("status", "severity", ClassFilter, TargetFilter)
    search_fields = ("public_id", "subject_id", "charge_id", "envelope_public_id")
    list_per_page = 100
    change_list_template = "admin/reconciliation/discrepancy/change_list.html"
    change_form_template = "admin/reconciliation/discrepancy/change_form.html"
    fields = ("public_id",)
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Discrepancy]:
        # Not super()'s: it would order by the annotations before the selector makes them.
        rows = self.model._default_manager.get_queryset()
        return discrepancy_queue(rows, now=timezone.now())

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return QUEUE_ORDER

    @admin.display(description="class", ordering="code")
    def class_code(self, obj: Discrepancy) -> SafeString:
        # The class in words; its code below as details, wrapping after an underscore.
        parts = obj.code.split("_")
        wrapped = format_html_join(mark_safe("_<wbr>"), "{}", ((part,) for part in parts))
        return format_html(
            '<span title="{}">{}</span><br><span class="vouch-quiet vouch-code">{}</span>',
            obj.public_id,
            class_label(obj.code),
            wrapped,
        )

    @admin.display(description="severity", ordering="severity_rank")
    def severity_badge(self, obj: Discrepancy) -> SafeString:
        return badge(
            severity_label(obj.severity), SEVERITY_TONES.get(Severity(obj.severity), "neutral")
        )

    @admin.display(description="subject", ordering="subject_id")
    def subject(self, obj: Discrepancy) -> SafeString:
        return format_html(
            "{}<br>{}", subject_type_label(obj.subject_type), provider_id(obj.subject_id)
        )

    @admin.display(description="summary")
    def short_summary(self, obj: Discrepancy) -> str:
        return Truncator(obj.summary).chars(90)

    @admin.display(description="amount", ordering="amount_micro")
    def amount(self, obj: Discrepancy) -> str:
        return dollars(obj.amount_micro) if obj.amount_micro else "—"

    @admin.display(description="first seen", ordering="first_seen_at")
    def first_seen(self, obj: Discrepancy) -> SafeString:
        day, _, rest = when(obj.first_seen_at).partition(" ")
        return format_html("{}<br>{}", day, rest)

    @admin.display(description="status", ordering="status")
    def status_label(self, obj: Discrepancy) -> SafeString:
        tone = STATUS_TONES.get(DiscrepancyStatus(obj.status), "neutral")
        return badge(status_label(obj.status, obj.resolution), tone)

    @admin.display(description="seen", ordering="seen_count")
    def seen(self, obj: Discrepancy) -> int:
        """How many runs saw it."""
        return obj.seen_count

    @admin.display(description="time left", ordering="due_at")
    def time_left(self, obj: Discrepancy) -> SafeString:
        return time_left(obj, timezone.now())

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "export.csv",
                self.admin_site.admin_view(self.export_view),
                name="{}_{}_export".format(*info),
            ),
            path(
                "<path:object_id>/acknowledge/",
                self.admin_site.admin_view(self.acknowledge_view),
                name="{}_{}_acknowledge".format(*info),
            ),
            path(
                "<path:object_id>/accept/",
                self.admin_site.admin_view(self.accept_view),
                name="{}_{}_accept".format(*info),
            ),
            path(
                "<path:object_id>/propose/",
                self.admin_site.admin_view(self.propose_view),
                name="{}_{}_propose".format(*info),
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        query = request.GET.copy()
        query.pop(ERROR_FLAG, None)
        context = {
            "overdue_count": discrepancies_overdue(now=timezone.now()).count(),
            "overdue_url": f"{_url('discrepancy_changelist')}?target=overdue",
            "export_url": _url("discrepancy_export") + (f"?{query.urlencode()}" if query else ""),
            # A wide list: the app sidebar would push its last columns out of a 1366 px screen.
            "is_nav_sidebar_enabled": False,
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The queue as currently filtered (the list's own query string), as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseRedirect(f"{_url('discrepancy_changelist')}?{ERROR_FLAG}=1")
        now = timezone.now()
        rows = discrepancy_export_rows(changelist.queryset, now=now)
        writer = csv.writer(_Echo())
        response = StreamingHttpResponse(
            (writer.writerow(row) for row in rows), content_type="text/csv; charset=utf-8"
        )
        name = f"discrepancies-{now:%Y%m%dT%H%M%SZ}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def page_context(self, request: HttpRequest, obj: Discrepancy | None) -> dict[str, Any]:
        if obj is None:
            return {}
        user = request.user
        is_open = obj.status != DiscrepancyStatus.RESOLVED
        money = obj.severity == Severity.MONEY
        can_work = is_open and user.has_perm(WORK_PERMISSION)
        waiting = obj.adjustment is not None and obj.adjustment.status == AdjustmentStatus.PROPOSED
        correction = discrepancy_correction(obj) if is_open and not waiting else None
        leg = (correction.refund_leg or correction.funding_leg) if correction else None
        can_propose = (
            correction is not None and bool(correction.kinds) and user.has_perm(PROPOSE_PERMISSION)
        )
        currency = _currency_of(obj)
        return {
            "discrepancy": obj,
            "severity_badge": self.severity_badge(obj),
            "subtitle": f"{class_label(obj.code)}: {subject_type_label(obj.subject_type)} "
            f"{obj.subject_id}",
            "class_words": class_label(obj.code),
            "subject_type_words": subject_type_label(obj.subject_type),
            "resolution_words": status_label(obj.status, obj.resolution),
            "escalation_words": _escalation_words(obj),
            "adjustment_status": worded(obj.adjustment.get_status_display(), obj.adjustment.status)
            if obj.adjustment is not None
            else "",
            "status_badge": badge(
                status_label(obj.status, obj.resolution),
                STATUS_TONES.get(DiscrepancyStatus(obj.status), "neutral"),
            ),
            "time_left": time_left(obj, timezone.now()),
            "amount_usd": dollars(obj.amount_micro),
            "amount_html": display.money(obj.amount_micro),
            "amount_micro_text": micro_text(obj.amount_micro),
            "subject_html": id_link(obj.subject_id),
            "charge_html": provider_id(obj.charge_id) if obj.charge_id else "",
            "envelope_html": id_link(obj.envelope_public_id),
            "envelope_url": _envelope_url(obj.envelope_public_id),
            "times": {
                "first_seen": when(obj.first_seen_at),
                "last_seen": when(obj.last_seen_at),
                "due": when(obj.due_at),
                "acknowledged": when(obj.acknowledged_at),
                "resolved": when(obj.resolved_at),
            },
            "first_run_url": _url("run_change", obj.first_run_id),
            "last_run_url": _url("run_change", obj.last_run_id),
            "sides": [
                {
                    "field": row.field,
                    "differs": row.differs,
                    "cells": (
                        _cell(row.vouch, row.vouch_absent, field=row.field, currency=currency),
                        _cell(
                            row.provider, row.provider_absent, field=row.field, currency=currency
                        ),
                    ),
                }
                for row in discrepancy_sides(obj)
            ],
            "observations": [
                (
                    label,
                    o,
                    when(o.observed_at),
                    _url("observation_change", o.pk),
                    _url("run_change", o.run_id),
                )
                for label, o in (("Last seen in", obj.observation), ("Cleared by", obj.cleared_by))
                if o is not None
            ],
            "adjustment_url": (
                reverse("admin:reconciliation_adjustment_change", args=[obj.adjustment_id])
                if obj.adjustment_id
                else ""
            ),
            "adjustment_moves": MOVES.get(AdjustmentKind(obj.adjustment.kind), "")
            if obj.adjustment is not None
            else "",
            "adjustment_usd": dollars(obj.adjustment.amount_micro) if obj.adjustment else "",
            "waiting": waiting,
            "history": [
                (e, when(e.created_at), history_label(e.action)) for e in discrepancy_history(obj)
            ],
            "is_open": is_open,
            "money": money,
            "can_acknowledge": can_work and obj.status == DiscrepancyStatus.OPEN,
            "can_accept": can_work and not money,
            "may_work": user.has_perm(WORK_PERMISSION),
            "may_propose": user.has_perm(PROPOSE_PERMISSION),
            "correction": correction,
            "leg": leg,
            "leg_usd": dollars(leg.amount_micro) if leg is not None else "",
            "leg_state": leg_state_words(leg) if leg is not None else "",
            "kinds": [(k.label, MOVES[k]) for k in correction.kinds] if correction else [],
            "can_propose": can_propose,
            "accept_form": AcceptForm(),
            "propose_form": DiscrepancyProposeForm(
                kinds=correction.kinds if correction else [],
                initial={"provider_object_id": correction.provider_object_id if correction else ""},
            ),
        }

    # --- the actions: each a POST of its own, one service each ------------------------------------

    def _act(
        self,
        request: HttpRequest,
        object_id: str,
        act: Callable[[User, Discrepancy], tuple[str, str | None]],
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        user = request.user
        if not isinstance(user, User):
            raise PermissionDenied
        discrepancy = self.get_object(request, unquote(object_id))
        if discrepancy is None:
            raise Http404(f"no discrepancy {object_id!r}")
        page = _url("discrepancy_change", discrepancy.pk)
        if request.method != "POST":
            return HttpResponseRedirect(page)
        try:
            done, then = act(user, discrepancy)
        except _FormError as exc:
            self.message_user(request, f"Not done: {exc}", messages.ERROR)
        except VouchError as exc:
            # The sentence for the person; the stable code stays, as details.
            self.message_user(
                request, f"Not done: {exc.message} (details: {exc.code})", messages.ERROR
            )
        except PermissionError as exc:
            self.message_user(
                request, f"Not done: {exc} (details: permission_denied)", messages.ERROR
            )
        else:
            self.message_user(request, done, messages.SUCCESS)
            return HttpResponseRedirect(then or page)
        return HttpResponseRedirect(page)

    def acknowledge_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def act(user: User, discrepancy: Discrepancy) -> tuple[str, str | None]:
            discrepancy_acknowledge(discrepancy=discrepancy, actor=user)
            return f"Discrepancy {discrepancy.public_id} is acknowledged: it is yours.", None

        return self._act(request, object_id, act)

    def accept_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def act(user: User, discrepancy: Discrepancy) -> tuple[str, str | None]:
            form = AcceptForm(request.POST)
            if not form.is_valid():
                raise _FormError(_errors(form))
            discrepancy_accept(discrepancy=discrepancy, actor=user, note=form.cleaned_data["note"])
            return f"Discrepancy {discrepancy.public_id} is accepted with your note.", None

        return self._act(request, object_id, act)

    def propose_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def act(user: User, discrepancy: Discrepancy) -> tuple[str, str | None]:
            form = DiscrepancyProposeForm(request.POST)
            if not form.is_valid():
                raise _FormError(_errors(form))
            adjustment = discrepancy_adjustment_propose(
                discrepancy=discrepancy,
                actor=user,
                kind=form.cleaned_data["kind"],
                reason=form.cleaned_data["reason"],
                provider_object_id=form.cleaned_data["provider_object_id"],
            )
            # To the adjustment's page (where it is approved), if this person may read it.
            then = None
            if user.has_perm("reconciliation.view_adjustment"):
                then = reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
            return (
                f"Adjustment {adjustment.public_id} is proposed on discrepancy "
                f"{discrepancy.public_id}. A second person with {APPROVE_PERMISSION} approves it.",
                then,
            )

        return self._act(request, object_id, act)


def _escalation_words(discrepancy: Discrepancy) -> str:
    """Its escalation's status (and how it was resolved) in words."""
    escalation = discrepancy.escalation
    if escalation is None:
        return ""
    said = escalation.get_status_display()
    if escalation.resolution:
        said = f"{said}: {escalation.get_resolution_display().lower()}"
    return said


def _currency_of(discrepancy: Discrepancy) -> str:
    """The currency its sides' amounts are in (usd when neither side names one)."""
    for side in (discrepancy.provider_side, discrepancy.vouch_side):
        if isinstance(side, dict) and isinstance(side.get("currency"), str) and side["currency"]:
            return str(side["currency"])
    return "usd"


def _errors(form: forms.Form) -> str:
    return "; ".join(
        f"{form.fields[name].label if name in form.fields else name}: "
        + " ".join(str(e) for e in errors)
        for name, errors in form.errors.items()
    )


class _Echo:
    """A file that gives back what is written to it: csv.writer's rows, streamed."""

    def write(self, value: str) -> str:
        return value
