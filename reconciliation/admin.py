"""Reconciliation in the admin (SPEC §15.4, §15.5): runs and the provider pages they read, the
discrepancy queue (open first, by severity, then age, with the time left to each one's target;
CSV export), a discrepancy's page (Vouch's side and the provider's next to each other, the
observations behind it, and its actions), and the adjustments queue: propose a correction from an
escalation, a leg or a discrepancy, and — as a second person with
`reconciliation.approve_adjustment` — approve it after confirming its amount, or reject it.
Views parse, check permission, call one service (`reconciliation.services`,
`envelopes.adjustments`), render; the services' refusals are shown as messages."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

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
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timezone import localtime

from accounts.models import User
from core.admin_base import ReadOnlyAdmin
from core.dashboard import stripe_dashboard_url, stripe_link
from core.exceptions import VouchError
from envelopes.adjustments import (
    APPROVE_PERMISSION,
    PROPOSE_PERMISSION,
    Subject,
    adjustment_approve,
    adjustment_kinds_for,
    adjustment_propose,
    adjustment_reject,
    subject_of_escalation,
)
from envelopes.admin import dollars
from envelopes.models import AdjustmentKind, AdjustmentStatus, FundingLeg, RefundLeg
from reconciliation.models import (
    Adjustment,
    Discrepancy,
    DiscrepancyClass,
    DiscrepancyStatus,
    Observation,
    Run,
    RunStatus,
    Severity,
)
from reconciliation.runs import report_verify
from reconciliation.selectors import (
    QUEUE_ORDER,
    discrepancies_overdue,
    discrepancies_within_target,
    discrepancy_correction,
    discrepancy_export_rows,
    discrepancy_history,
    discrepancy_queue,
    discrepancy_sides,
    observation_discrepancies,
    run_class_counts,
    run_discrepancies_cleared,
    run_discrepancies_opened,
    run_observations,
    run_totals,
)
from reconciliation.services import (
    WORK_PERMISSION,
    discrepancy_accept,
    discrepancy_acknowledge,
    discrepancy_adjustment_propose,
)
from verification.admin import compact_json, pretty_json
from verification.models import Escalation

# What each correction does to the balances, in words the approver confirms.
MOVES = {
    AdjustmentKind.LEG_RELEASE: "reserved → unspent",
    AdjustmentKind.LEG_ACCEPT: "reserved → refunded",
    AdjustmentKind.LEG_REVERSE: "refunded → unspent",
    AdjustmentKind.FOREIGN_REFUND: "unspent → refunded",
    AdjustmentKind.FUNDING_ACCEPT: "funded and unspent +",
    AdjustmentKind.FUNDING_ABANDON: "no money moves (the leg is abandoned)",
    AdjustmentKind.CONFIRM: "no money moves (the ledger is confirmed as it stands)",
}


class ProposeForm(forms.Form):
    kind = forms.ChoiceField(label="Correction", choices=[])
    provider_object_id = forms.CharField(
        required=False,
        max_length=100,
        label="Provider object",
        help_text="The provider refund (re_…) or PaymentIntent (pi_…) it rests on, when the "
        "correction names one. It is read from the provider now and again at approval.",
    )
    reason = forms.CharField(
        required=False,
        label="Reason",
        help_text="What you checked (e.g. in the Stripe Dashboard) and why this corrects it.",
        widget=forms.Textarea(attrs={"rows": 5, "cols": 80, "required": True}),
    )

    def __init__(self, *args: Any, kinds: list[AdjustmentKind], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kind = self.fields["kind"]
        if isinstance(kind, forms.ChoiceField):
            kind.choices = [(k.value, k.label) for k in kinds]


class ApproveForm(forms.Form):
    confirmed_amount_micro = forms.IntegerField(
        label="Amount you confirm (micro-dollars)",
        help_text="Type the amount shown above: the correction is written only if it matches.",
    )
    note = forms.CharField(required=False, label="Note", widget=forms.Textarea(attrs={"rows": 3}))


class RejectForm(forms.Form):
    note = forms.CharField(
        required=False, label="Why not", widget=forms.Textarea(attrs={"rows": 3, "required": True})
    )


@admin.register(Adjustment)
class AdjustmentAdmin(ReadOnlyAdmin):
    """Proposed first, newest first."""

    list_display = (
        "public_id",
        "status",
        "kind",
        "envelope",
        "amount",
        "proposed_by",
        "proposed_at",
        "decided_by",
    )
    list_filter = ("status", "kind")
    list_select_related = ("envelope", "proposed_by", "decided_by")
    search_fields = ("public_id", "envelope__public_id", "provider_object_id")
    change_form_template = "admin/reconciliation/adjustment/change_form.html"
    propose_template = "admin/reconciliation/adjustment/propose.html"
    fields = ("public_id",)
    readonly_fields = fields

    @admin.display(description="amount", ordering="amount_micro")
    def amount(self, obj: Adjustment) -> str:
        return dollars(obj.amount_micro)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "propose/",
                self.admin_site.admin_view(self.propose_view),
                name="{}_{}_propose".format(*info),
            ),
            path(
                "<path:object_id>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="{}_{}_decide".format(*info),
            ),
            *super().get_urls(),
        ]

    def page_context(self, request: HttpRequest, obj: Adjustment | None) -> dict[str, Any]:
        if obj is None:
            return {}
        user = request.user
        waiting = obj.status == AdjustmentStatus.PROPOSED
        return {
            "adjustment": obj,
            "moves": MOVES.get(AdjustmentKind(obj.kind), ""),
            "amount_usd": dollars(obj.amount_micro),
            "provider_json": pretty_json(obj.provider_object) if obj.provider_object else "",
            "can_approve": waiting
            and user.has_perm(APPROVE_PERMISSION)
            and obj.proposed_by_id != user.pk,
            "own_proposal": obj.proposed_by_id == user.pk,
            "can_reject": waiting
            and (user.has_perm(APPROVE_PERMISSION) or obj.proposed_by_id == user.pk),
            "approve_form": ApproveForm(),
            "reject_form": RejectForm(),
            "journal": list(obj.journal.all()),
        }

    def _user(self, request: HttpRequest) -> User:
        user = request.user
        if not isinstance(user, User):
            raise PermissionDenied
        return user

    def propose_view(self, request: HttpRequest) -> HttpResponse:
        user = self._user(request)
        if not user.has_perm(PROPOSE_PERMISSION):
            raise PermissionDenied(f"Proposing an adjustment needs {PROPOSE_PERMISSION}.")
        escalation, subject = self._subject(request)
        kinds = adjustment_kinds_for(
            refund_leg=subject.refund_leg,
            funding_leg=subject.funding_leg if subject.refund_leg is None else None,
        )
        form = ProposeForm(request.POST or None, kinds=kinds)
        if request.method == "POST" and form.is_valid():
            try:
                adjustment = adjustment_propose(
                    actor=user,
                    kind=form.cleaned_data["kind"],
                    reason=form.cleaned_data["reason"],
                    escalation=escalation,
                    refund_leg=subject.refund_leg if escalation is None else None,
                    funding_leg=subject.funding_leg
                    if escalation is None and subject.refund_leg is None
                    else None,
                    provider_object_id=form.cleaned_data["provider_object_id"],
                )
            except VouchError as exc:
                self.message_user(
                    request, f"Not proposed ({exc.code}): {exc.message}", messages.ERROR
                )
            else:
                self.message_user(
                    request,
                    f"Adjustment {adjustment.public_id} is proposed. A second person with "
                    f"{APPROVE_PERMISSION} approves it.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(
                    reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
                )
        leg = subject.refund_leg or subject.funding_leg
        context = {
            **self.admin_site.each_context(request),
            "title": "Propose an adjustment",
            "subtitle": None,
            "opts": self.opts,
            "form": form,
            "escalation": escalation,
            "envelope": subject.envelope,
            "leg": leg,
            "leg_kind": "refund leg" if subject.refund_leg is not None else "funding leg",
            "leg_amount_usd": dollars(leg.amount_micro) if leg is not None else "",
            "kinds": [(k.value, k.label, MOVES[k]) for k in kinds],
            "has_view_permission": self.has_view_permission(request),
        }
        return TemplateResponse(request, self.propose_template, context)

    def _subject(self, request: HttpRequest) -> tuple[Escalation | None, Subject]:
        params = request.GET
        try:
            if "escalation" in params:
                escalation = Escalation.objects.filter(pk=int(params["escalation"])).first()
                if escalation is None:
                    raise Http404("no such escalation")
                return escalation, subject_of_escalation(escalation)
            if "refund_leg" in params:
                leg = (
                    RefundLeg.objects.select_related("operation__envelope", "funding_leg")
                    .filter(public_id=params["refund_leg"])
                    .first()
                )
                if leg is not None:
                    return None, Subject(
                        leg.operation.envelope, refund_leg=leg, funding_leg=leg.funding_leg
                    )
            if "funding_leg" in params:
                funding = (
                    FundingLeg.objects.select_related("envelope")
                    .filter(public_id=params["funding_leg"])
                    .first()
                )
                if funding is not None:
                    return None, Subject(funding.envelope, funding_leg=funding)
        except (ValueError, VouchError) as exc:
            raise Http404(str(exc)) from exc
        raise Http404("Name an escalation, a refund leg or a funding leg.")

    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        user = self._user(request)
        adjustment = self.get_object(request, unquote(object_id))
        if adjustment is None:
            raise Http404(f"no adjustment {object_id!r}")
        if request.method != "POST":
            return HttpResponseRedirect(self._change_url(adjustment))
        try:
            if "approve" in request.POST:
                form = ApproveForm(request.POST)
                if not form.is_valid():
                    raise _FormError("Type the amount to confirm, as an integer of micro-dollars.")
                adjustment_approve(
                    adjustment=adjustment,
                    actor=user,
                    confirmed_amount_micro=form.cleaned_data["confirmed_amount_micro"],
                    note=form.cleaned_data["note"],
                )
                done = f"Adjustment {adjustment.public_id} is approved and written to the journal."
            else:
                reject = RejectForm(request.POST)
                reject.is_valid()
                adjustment_reject(
                    adjustment=adjustment, actor=user, note=reject.cleaned_data.get("note", "")
                )
                done = f"Adjustment {adjustment.public_id} is rejected; nothing moved."
        except _FormError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        except VouchError as exc:
            if exc.status_code == 403 and exc.code == "permission_denied":
                raise PermissionDenied(exc.message) from exc
            self.message_user(request, f"Not done ({exc.code}): {exc.message}", messages.ERROR)
        else:
            self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(self._change_url(adjustment))

    def _change_url(self, adjustment: Adjustment) -> str:
        return reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])


class _FormError(Exception):
    pass


# --- presentation helpers -------------------------------------------------------------------------

SEVERITY_TONES = {Severity.MONEY: "bad", Severity.EVIDENCE: "warn", Severity.HYGIENE: "neutral"}
STATUS_TONES = {
    DiscrepancyStatus.OPEN: "bad",
    DiscrepancyStatus.ACKNOWLEDGED: "warn",
    DiscrepancyStatus.RESOLVED: "good",
}
RUN_TONES = {RunStatus.RUNNING: "warn", RunStatus.COMPLETED: "good", RunStatus.FAILED: "bad"}


def when(moment: datetime | None) -> str:
    """Every time on these pages in the site's one format, with its time zone (config/formats)."""
    return date_format(localtime(moment), "DATETIME_FORMAT") if moment is not None else "—"


def span(delta: timedelta) -> str:
    """A length of time in its two largest units: `2 d 3 h`, `3 h 12 min`, `3 min 20 s`."""
    seconds = int(abs(delta).total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    return f"{seconds} s"


def time_left(discrepancy: Discrepancy, now: datetime) -> SafeString:
    """The time left to its target, or how long it is overdue (marked in words, not only in
    colour); nothing for a resolved one."""
    if discrepancy.status == DiscrepancyStatus.RESOLVED:
        return mark_safe('<span class="vouch-quiet">—</span>')
    left = discrepancy.due_at - now
    if left < timedelta(0):
        return format_html(
            '<span class="vouch-overdue" title="target {}">⚠ overdue by {}</span>',
            when(discrepancy.due_at),
            span(left),
        )
    return format_html(
        '<span class="vouch-left" title="target {}">{} left</span>',
        when(discrepancy.due_at),
        span(left),
    )


def dashboard_url(object_id: str) -> str:
    """The object in the Stripe Dashboard (`core.dashboard`: test or live by the key's mode), or ""
    for a value that is not a Stripe object's id (a status, an amount, a Vouch id)."""
    _, _, rest = object_id.partition("_")
    if not rest or not rest.isalnum():
        return ""
    return stripe_dashboard_url(object_id) or ""


def provider_id(object_id: str) -> SafeString | str:
    """A Stripe id as a link to the Dashboard, anything else as plain monospace text."""
    if object_id and dashboard_url(object_id):
        return stripe_link(object_id)
    return format_html('<span class="vouch-mono">{}</span>', object_id or "—")


def badge(text: str, tone: str) -> SafeString:
    return format_html('<span class="vouch-badge vouch-{}">{}</span>', tone, text)


def _url(name: str, *args: Any) -> str:
    return reverse(f"admin:reconciliation_{name}", args=args)


def _envelope_url(public_id: str) -> str:
    """The envelope's admin list, searched by its public id (the admin pages go by primary key)."""
    if not public_id:
        return ""
    return f"{reverse('admin:envelopes_envelope_changelist')}?{urlencode({'q': public_id})}"


def _cell(value: Any, absent: bool) -> dict[str, Any]:
    text = compact_json(value) if not absent else ""
    return {
        "absent": absent,
        "text": text,
        "url": dashboard_url(value) if isinstance(value, str) else "",
    }


# --- runs -----------------------------------------------------------------------------------------


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Newest first (the model's ordering)."""

    list_display = (
        "public_id",
        "kind",
        "status_badge",
        "window",
        "started",
        "duration",
        "compared_total",
        "provider_calls",
        "opened_total",
        "still_open_total",
        "cleared_total",
        "report_short",
    )
    list_filter = ("kind", "status", "lane")
    search_fields = ("public_id", "report_sha256")
    change_form_template = "admin/reconciliation/run/change_form.html"
    fields = ("public_id",)
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Run) -> SafeString:
        label = f"{obj.status} (dry run)" if obj.dry_run else obj.status
        return badge(label, RUN_TONES.get(RunStatus(obj.status), "neutral"))

    @admin.display(description="window", ordering="window_start")
    def window(self, obj: Run) -> SafeString:
        return format_html("{}<br>→ {}", when(obj.window_start), when(obj.window_end))

    @admin.display(description="started", ordering="started_at")
    def started(self, obj: Run) -> str:
        return when(obj.started_at)

    @admin.display(description="duration")
    def duration(self, obj: Run) -> str:
        end = obj.finished_at or obj.heartbeat_at
        text = span(end - obj.started_at)
        return text if obj.finished_at else f"{text} so far"

    @admin.display(description="compared")
    def compared_total(self, obj: Run) -> int:
        return run_totals(obj).compared

    @admin.display(description="opened")
    def opened_total(self, obj: Run) -> int:
        return run_totals(obj).opened

    @admin.display(description="still open")
    def still_open_total(self, obj: Run) -> int:
        return run_totals(obj).still_open

    @admin.display(description="cleared")
    def cleared_total(self, obj: Run) -> int:
        return run_totals(obj).cleared

    @admin.display(description="report SHA-256", ordering="report_sha256")
    def report_short(self, obj: Run) -> SafeString | str:
        if not obj.report_sha256:
            return "—"
        return format_html(
            '<span class="vouch-mono" title="{}">{}…</span>',
            obj.report_sha256,
            obj.report_sha256[:12],
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # A wide list: the app sidebar would push its last columns out of a 1366 px screen.
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, context)

    def page_context(self, request: HttpRequest, obj: Run | None) -> dict[str, Any]:
        if obj is None:
            return {}
        observations = run_observations(obj)
        shown = list(observations[:OBSERVATIONS_SHOWN])
        count = observations.count() if len(shown) == OBSERVATIONS_SHOWN else len(shown)
        totals = run_totals(obj)
        return {
            "run": obj,
            "status_badge": self.status_badge(obj),
            "duration_text": self.duration(obj),
            "started_text": when(obj.started_at),
            "finished_text": when(obj.finished_at),
            "heartbeat_text": when(obj.heartbeat_at),
            "window_start_text": when(obj.window_start),
            "window_end_text": when(obj.window_end),
            "totals": totals,
            "compared": sorted((obj.compared or {}).items()),
            "class_counts": run_class_counts(obj),
            "observations": [(o, when(o.observed_at), compact_json(o.request)) for o in shown],
            "observations_count": count,
            "observations_url": f"{_url('observation_changelist')}?run__id__exact={obj.pk}",
            "opened": [
                (d, _url("discrepancy_change", d.pk))
                for d in run_discrepancies_opened(obj, now=timezone.now())
            ],
            "cleared": [
                (d, _url("discrepancy_change", d.pk)) for d in run_discrepancies_cleared(obj)
            ],
            "report_check": report_verify(obj) if obj.report else None,
            "checkpoint_json": pretty_json(obj.checkpoint) if obj.checkpoint else "",
            "report_json": pretty_json(obj.report) if obj.report else "",
        }


OBSERVATIONS_SHOWN = 200


@admin.register(Observation)
class ObservationAdmin(ReadOnlyAdmin):
    """The provider pages runs read, each with the SHA-256 of the answer as received."""

    list_display = ("id", "run_link", "kind", "observed", "sha256_short")
    list_filter = ("kind",)
    list_select_related = ("run",)
    search_fields = ("sha256", "run__public_id")
    change_form_template = "admin/reconciliation/observation/change_form.html"
    fields = ("kind",)
    readonly_fields = fields

    @admin.display(description="run", ordering="run__started_at")
    def run_link(self, obj: Observation) -> SafeString:
        return format_html('<a href="{}">{}</a>', _url("run_change", obj.run_id), obj.run.public_id)

    @admin.display(description="observed", ordering="observed_at")
    def observed(self, obj: Observation) -> str:
        return when(obj.observed_at)

    @admin.display(description="SHA-256", ordering="sha256")
    def sha256_short(self, obj: Observation) -> SafeString:
        return format_html(
            '<span class="vouch-mono" title="{}">{}…</span>', obj.sha256, obj.sha256[:16]
        )

    def page_context(self, request: HttpRequest, obj: Observation | None) -> dict[str, Any]:
        if obj is None:
            return {}
        return {
            "observation": obj,
            "observed_text": when(obj.observed_at),
            "run_url": _url("run_change", obj.run_id),
            "request_json": pretty_json(obj.request),
            **observation_shown(obj),
            "discrepancies": [
                (d, _url("discrepancy_change", d.pk)) for d in observation_discrepancies(obj)
            ],
        }


def observation_shown(obj: Observation) -> dict[str, Any]:
    """The answer for the page: the stored bytes decompressed (pretty-printed when they are
    JSON), whether they still hash to the recorded SHA-256, and how large they are."""
    raw = obj.body_bytes()
    if raw is None:  # stored before bodies were kept: the parsed JSON is all there is
        return {"legacy": True, "data_json": pretty_json(obj.data), "sha256_matches": None}
    try:
        shown = pretty_json(json.loads(raw))
    except ValueError:
        shown = raw.decode("utf-8", errors="replace")
    return {
        "legacy": False,
        "data_json": shown,
        "sha256_matches": hashlib.sha256(raw).hexdigest() == obj.sha256,
        "body_length": len(raw),
        "stored_length": len(bytes(obj.body or b"")),
    }


# --- the discrepancy queue ------------------------------------------------------------------------


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
    """By class, named by its stable code (the codes the runs, the CSV and the runbooks use)."""

    title = "class"
    parameter_name = "class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(code, code) for code in DiscrepancyClass.values]

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
        # Long codes wrap after an underscore, never inside a word.
        parts = obj.code.split("_")
        wrapped = format_html_join(mark_safe("_<wbr>"), "{}", ((part,) for part in parts))
        return format_html('<span class="vouch-code" title="{}">{}</span>', obj.public_id, wrapped)

    @admin.display(description="severity", ordering="severity_rank")
    def severity_badge(self, obj: Discrepancy) -> SafeString:
        return badge(obj.severity, SEVERITY_TONES.get(Severity(obj.severity), "neutral"))

    @admin.display(description="subject", ordering="subject_id")
    def subject(self, obj: Discrepancy) -> SafeString:
        return format_html("{}<br>{}", obj.subject_type, provider_id(obj.subject_id))

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
        if obj.resolution:
            return format_html("{}<br>{}", badge(obj.status, tone), obj.resolution)
        return badge(obj.status, tone)

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
        return {
            "discrepancy": obj,
            "severity_badge": self.severity_badge(obj),
            "status_badge": badge(
                " · ".join(filter(None, (obj.status, obj.resolution))),
                STATUS_TONES.get(DiscrepancyStatus(obj.status), "neutral"),
            ),
            "time_left": time_left(obj, timezone.now()),
            "amount_usd": dollars(obj.amount_micro),
            "subject_html": provider_id(obj.subject_id),
            "charge_html": provider_id(obj.charge_id) if obj.charge_id else "",
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
                        _cell(row.vouch, row.vouch_absent),
                        _cell(row.provider, row.provider_absent),
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
            "history": [(e, when(e.created_at)) for e in discrepancy_history(obj)],
            "is_open": is_open,
            "money": money,
            "can_acknowledge": can_work and obj.status == DiscrepancyStatus.OPEN,
            "can_accept": can_work and not money,
            "may_work": user.has_perm(WORK_PERMISSION),
            "may_propose": user.has_perm(PROPOSE_PERMISSION),
            "correction": correction,
            "leg": leg,
            "leg_usd": dollars(leg.amount_micro) if leg is not None else "",
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
            self.message_user(request, f"Not done ({exc.code}): {exc.message}", messages.ERROR)
        except PermissionError as exc:
            self.message_user(request, f"Not done (permission_denied): {exc}", messages.ERROR)
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
