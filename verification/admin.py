"""The ops staff's view of verification (SPEC §10): runs with the timeline of their attempts and
the evidence each one saw, the escalations queue with its Resolve action, and the provider events
received by webhook.

Everything is read-only, as the engine alone writes runs and events. The one write, Resolve, goes
through `escalation_resolve`, which checks the permission and the note and writes the audit event.
What this module adds is presentation: pretty JSON, labels and colours for people who have never
read the engine's code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from accounts.models import User
from core.admin_base import AmountSearchAdmin, ReadOnlyAdmin, short_id, two_lines
from core.dashboard import stripe_link
from verification.contracts import Contract, get_contract
from verification.models import (
    Attempt,
    Escalation,
    EscalationStatus,
    Notification,
    Observation,
    ProviderEvent,
    Verdict,
    VerificationRun,
)
from verification.services import escalation_resolve

PROPOSE_ADJUSTMENT_PERMISSION = "envelopes.add_adjustment"
PROPOSE_ADJUSTMENT_PERMISSION = "envelopes.add_adjustment"
RESOLVE_PERMISSION = "verification.resolve_escalation"

LEVEL_MEANINGS = {
    "E0": "a claim",
    "E1": "the action's own response",
    "E2": "an independent provider readback",
    "E3": "a provider-originated event",
}
KINDS = {
    "pre_completion": "pre-completion rule",
    "contradicted": "contradiction",
    "verified": "verification",
}
# A condition's result read for the effect: a verification that holds supports it, a
# contradiction or a pre-completion rule that holds goes against it.
SUPPORTS = {"verified": "true", "contradicted": "false", "pre_completion": "false"}
VERDICT_TONES: dict[str, str] = {
    Verdict.VERIFIED: "good",
    Verdict.CONTRADICTED: "bad",
    Verdict.FAILED: "bad",
    Verdict.UNVERIFIABLE: "warn",
    Verdict.PENDING: "neutral",
}


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def compact_json(value: Any) -> str:
    """A condition's actual or expected value on one line; text as it is, nothing as a dash."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def duration(ms: int) -> str:
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms / 1000:g} s"


# --- the run page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConditionRow:
    name: str
    kind: str
    meaning: str
    result: str
    tone: str  # good | bad | unknown
    actual: str
    expected: str


@dataclass(frozen=True)
class ObservationRow:
    observation: Observation
    level_meaning: str
    channel_description: str
    data: str


@dataclass(frozen=True)
class AttemptRow:
    attempt: Attempt
    label: str
    tone: str
    decided_run: bool
    conditions: list[ConditionRow] = field(default_factory=list)
    observations: list[ObservationRow] = field(default_factory=list)


def _meanings(contract: Contract | None) -> dict[str, str]:
    """What each of the contract's conditions means, by name, in the contract's own words."""
    if contract is None:
        return {}
    meanings = {c.name: c.meaning for c in contract.verified}
    meanings |= {c.name: f"{c.reason} (class: {c.class_})" for c in contract.contradicted}
    meanings |= {r.name: f"{r.reason} (would be {r.verdict})" for r in contract.pre_completion}
    return meanings


def _condition_row(raw: Any, meanings: dict[str, str]) -> ConditionRow:
    item = raw if isinstance(raw, dict) else {"name": str(raw)}
    kind = str(item.get("kind", ""))
    result = str(item.get("result", "unknown"))
    if result not in ("true", "false"):
        tone = "unknown"
    else:
        tone = "good" if SUPPORTS.get(kind) == result else "bad"
    name = str(item.get("name", ""))
    return ConditionRow(
        name=name,
        kind=KINDS.get(kind, kind),
        meaning=meanings.get(name, ""),
        result=result,
        tone=tone,
        actual=compact_json(item.get("actual")),
        expected=compact_json(item.get("expected")),
    )


def _attempt_label(attempt: Attempt) -> str:
    if attempt.number:
        return f"Attempt #{attempt.number} ({attempt.trigger})"
    return f"{attempt.trigger.capitalize()}-triggered attempt"


def provider_objects(run: VerificationRun) -> list[tuple[str, str]]:
    """The provider objects a run is about, as (label, id): the object the action returned and
    the charge of its input."""
    result = run.action_result if isinstance(run.action_result, dict) else {}
    inputs = run.input if isinstance(run.input, dict) else {}
    found: list[tuple[str, str]] = []
    for label, value in (
        ("object", result.get("id")),
        ("charge", inputs.get("charge") or result.get("charge")),
        ("PaymentIntent", result.get("payment_intent")),
    ):
        if isinstance(value, str) and value and all(value != seen for _, seen in found):
            found.append((label, value))
    return found


def run_page_context(run: VerificationRun) -> dict[str, Any]:
    try:
        contract: Contract | None = get_contract(run.contract_id)
    except LookupError:
        contract = None
    channels = {c.name: c.description for c in contract.channels} if contract else {}
    meanings = _meanings(contract)
    attempts = run.attempts.order_by("started_at", "id").prefetch_related("observations")
    timeline = [
        AttemptRow(
            attempt=attempt,
            label=_attempt_label(attempt),
            tone=VERDICT_TONES.get(attempt.verdict, "neutral"),
            decided_run=attempt.pk == run.decided_by_id,
            conditions=[_condition_row(c, meanings) for c in attempt.conditions or []],
            observations=[
                ObservationRow(
                    observation=o,
                    level_meaning=LEVEL_MEANINGS.get(o.level, ""),
                    channel_description=channels.get(o.channel, ""),
                    data=pretty_json(o.data),
                )
                for o in attempt.observations.all()
            ],
        )
        for attempt in attempts
    ]
    return {
        "run": run,
        "contract": contract,
        "contract_outdated": contract is not None and contract.version != run.contract_version,
        "max_attempts": contract.timing.max_attempts if contract else None,
        "stale_read_window": duration(contract.timing.stale_read_window_ms) if contract else "",
        "verdict_tone": VERDICT_TONES.get(run.verdict, "neutral"),
        "input_json": pretty_json(run.input),
        "provider_objects": provider_objects(run),
        "action_result_json": pretty_json(run.action_result),
        "correlation": [
            (key, compact_json(value)) for key, value in sorted((run.correlation or {}).items())
        ],
        "timeline": timeline,
        "decided_by_label": next((row.label for row in timeline if row.decided_run), ""),
        "escalations": run.escalations.select_related("resolved_by").order_by("created_at", "id"),
    }


@admin.register(VerificationRun)
class VerificationRunAdmin(AmountSearchAdmin, ReadOnlyAdmin):
    """Verdict first: it is what a person decides by; then what the run is about (the provider
    object, linked to the Stripe Dashboard) and its amount."""

    list_display = (
        "verdict_badge",
        "run",
        "about",
        "tries",
        "created",
        "decided",
    )
    list_display_links = ("run",)
    list_filter = ("verdict", "contract_id")
    # Provider ids (refund, charge, PaymentIntent) match a resolved correlation key exactly, or
    # the run's input charge or the provider object it verifies.
    search_fields = ("public_id", "operation_id", "=keys__value")
    search_help_text = (
        "Run id, operation (idempotency key), refund (re_…), charge (ch_…) or PaymentIntent "
        "(pi_…) id, or an amount in dollars (12.50)."
    )
    date_hierarchy = "created_at"
    change_form_template = "admin/verification/verificationrun/change_form.html"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[VerificationRun], search_term: str
    ) -> tuple[QuerySet[VerificationRun], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term and " " not in term:
            results = results | queryset.filter(
                Q(input__charge=term)
                | Q(action_result__id=term)
                | Q(action_result__payment_intent=term)
                | Q(action_result__charge=term)
            )
            may_have_duplicates = True
        return results, may_have_duplicates

    def rows_with_amount(self, queryset: QuerySet[Any], amount_micro: int) -> QuerySet[Any]:
        # Runs hold the amount as the provider took it: whole cents.
        if amount_micro % 10_000:
            return queryset.none()
        return queryset.filter(input__amount=amount_micro // 10_000)

    @admin.display(description="verdict", ordering="verdict")
    def verdict_badge(self, obj: VerificationRun) -> SafeString:
        return format_html(
            '<span class="vouch-badge vouch-{}">{}</span>{}',
            VERDICT_TONES.get(obj.verdict, "neutral"),
            obj.verdict,
            format_html('<br><span class="vouch-quiet">{}</span>', obj.verdict_class)
            if obj.verdict_class
            else "",
        )

    @admin.display(description="tries", ordering="attempts_made")
    def tries(self, obj: VerificationRun) -> int:
        """Scheduled attempts so far."""
        return obj.attempts_made

    @admin.display(description="run", ordering="public_id")
    def run(self, obj: VerificationRun) -> SafeString:
        return format_html(
            '{}<span class="vouch-sub">{}</span>', short_id(obj.public_id), obj.contract_id
        )

    @admin.display(description="about")
    def about(self, obj: VerificationRun) -> SafeString | str:
        """The provider object (linked to the Dashboard) and the amount asked, in dollars."""
        result = obj.action_result if isinstance(obj.action_result, dict) else {}
        inputs = obj.input if isinstance(obj.input, dict) else {}
        subject = str(result.get("id") or inputs.get("charge") or "")
        cents = inputs.get("amount")
        amount = (
            f"${cents // 100:,}.{cents % 100:02d}"
            if isinstance(cents, int) and not isinstance(cents, bool)
            else ""
        )
        return format_html(
            '{}<span class="vouch-sub">{}</span>', stripe_link(subject) if subject else "—", amount
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: VerificationRun) -> SafeString:
        return two_lines(obj.created_at)

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, obj: VerificationRun) -> SafeString | str:
        return two_lines(obj.decided_at) if obj.decided_at else "—"

    def page_context(self, request: HttpRequest, obj: VerificationRun | None) -> dict[str, Any]:
        return run_page_context(obj) if obj is not None else {}


# --- escalations ------------------------------------------------------------------------------


def _run_link(run: VerificationRun) -> SafeString:
    url = reverse("admin:verification_verificationrun_change", args=[run.pk])
    return format_html('<a href="{}">{}</a>', url, run.public_id)


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
        "verdict",
        "verdict_class",
        "short_reason",
        "about",
        "created_at",
        "resolved_by",
    )
    list_filter = ("status", "money", "verdict")
    list_select_related = ("run", "resolved_by")
    search_fields = ("run__public_id", "run__operation_id", "subject_id")
    fields = (
        "run_link",
        "subject_type",
        "subject_id",
        "money",
        "verdict",
        "verdict_class",
        "reason",
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

    @admin.display(description="reason")
    def short_reason(self, obj: Escalation) -> str:
        return Truncator(obj.reason).chars(80)

    @admin.display(description="run", ordering="run__public_id")
    def run_link(self, obj: Escalation) -> SafeString | str:
        return _run_link(obj.run) if obj.run is not None else "—"

    @admin.display(description="about")
    def about(self, obj: Escalation) -> SafeString | str:
        if obj.run is not None:
            return _run_link(obj.run)
        return obj.subject_label or "—"

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
            "can_resolve": is_open and not money and request.user.has_perm(RESOLVE_PERMISSION),
            "can_propose": is_open
            and money
            and bool(propose_url)
            and request.user.has_perm(PROPOSE_ADJUSTMENT_PERMISSION),
            "propose_url": propose_url,
            "adjustments": list(obj.adjustments.select_related("proposed_by")) if obj else [],
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
                self.message_user(
                    request,
                    f"Escalation #{escalation.pk} on {escalation.run or escalation.subject_label} "
                    "is resolved.",
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
            "form": form,
            "has_view_permission": self.has_view_permission(request, escalation),
        }
        return TemplateResponse(request, self.resolve_template, context)


# --- provider events --------------------------------------------------------------------------


class ProcessedFilter(admin.SimpleListFilter):
    title = "processed"
    parameter_name = "processed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Processed"), ("no", "Not processed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(processed_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(processed_at__isnull=True)
        return queryset


EVENT_FIELDS = (
    "provider",
    "event_id",
    "dashboard",
    "type",
    "provider_created_at",
    "received_at",
    "processed_at",
    "duplicates",
    "attempts",
    "next_attempt_at",
    "processing_error",
    "payload_json",
)


@admin.register(ProviderEvent)
class ProviderEventAdmin(ReadOnlyAdmin):
    list_display = (
        "event_id",
        "dashboard",
        "type",
        "provider_created_at",
        "received_at",
        "processed_at",
        "duplicates",
        "attempts",
    )
    list_filter = ("type", ProcessedFilter)
    search_fields = ("event_id",)
    date_hierarchy = "received_at"
    fieldsets = (
        (
            None,
            {"fields": EVENT_FIELDS},
        ),
        ("The body exactly as received", {"classes": ("collapse",), "fields": ("raw",)}),
    )
    readonly_fields = (*EVENT_FIELDS, "raw")

    @admin.display(description="Stripe")
    def dashboard(self, obj: ProviderEvent) -> SafeString | str:
        """The event, and the object it is about, in the Stripe Dashboard."""
        data = obj.payload.get("data") if isinstance(obj.payload, dict) else None
        inner = data.get("object") if isinstance(data, dict) else None
        object_id = inner.get("id") if isinstance(inner, dict) else None
        links = [stripe_link(obj.event_id)]
        if isinstance(object_id, str) and object_id:
            links.append(stripe_link(object_id))
        return format_html_join(mark_safe("<br>"), "{}", ((link,) for link in links))

    @admin.display(description="provider created", ordering="provider_created")
    def provider_created_at(self, obj: ProviderEvent) -> str:
        moment = datetime.fromtimestamp(obj.provider_created, UTC)
        return f"{date_format(moment, 'DATETIME_FORMAT')} ({obj.provider_created})"

    @admin.display(description="payload")
    def payload_json(self, obj: ProviderEvent) -> SafeString:
        return format_html('<pre class="vouch-json">{}</pre>', pretty_json(obj.payload))
