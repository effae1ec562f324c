"""The adjustments queue in the admin: propose a correction from an escalation, a leg or a
discrepancy, and — as a second person with `reconciliation.approve_adjustment` — approve it after
confirming its amount, or reject it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.models import User
from core.admin_base import ReadOnlyAdmin
from core.display import micro_text
from core.exceptions import VouchError
from core.forms import DollarsField
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
from envelopes.selectors.words import (
    adjustment_status_label,
    funding_status_label,
    journal_kind_label,
    provider_read_purpose_label,
    refund_outcome_words,
)
from reconciliation.admin.shared import MOVES, _FormError
from reconciliation.models import Adjustment
from verification.admin import pretty_json, verdict_html, worded
from verification.models import Escalation


def leg_state_html(leg: RefundLeg | FundingLeg | None) -> SafeString | str:
    """Where the leg stands, in words, its code as details."""
    if isinstance(leg, RefundLeg):
        codes = " · ".join(c for c in (leg.outcome, leg.error_code) if c)
        return worded(refund_outcome_words(leg.outcome, leg.error_code), codes)
    if isinstance(leg, FundingLeg):
        return worded(funding_status_label(leg.status), leg.status)
    return ""


def escalation_html(escalation: Escalation | None) -> SafeString | str:
    """An escalation's verdict and status in words, codes as details."""
    if escalation is None:
        return ""
    return format_html(
        "{} · {}",
        verdict_html(escalation.verdict, escalation.verdict_class),
        worded(escalation.get_status_display(), escalation.status),
    )


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
    # In dollars, as the page shows the amount: `2.00` or `$2.00` (cleaned to micro-dollars).
    confirmed_amount = DollarsField(
        label="Amount you confirm (dollars)",
        help_text="Type the amount shown above in dollars, e.g. 2.00 or $2.00: the correction is "
        "written only if it matches.",
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
        "status_words",
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

    @admin.display(description="status", ordering="status")
    def status_words(self, obj: Adjustment) -> SafeString:
        return format_html(
            '<span title="{}">{}</span>', obj.status, adjustment_status_label(obj.status)
        )

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
            "amount_micro_text": micro_text(obj.amount_micro),
            "provider_json": pretty_json(obj.provider_object) if obj.provider_object else "",
            "can_approve": waiting
            and user.has_perm(APPROVE_PERMISSION)
            and obj.proposed_by_id != user.pk,
            "own_proposal": obj.proposed_by_id == user.pk,
            "can_reject": waiting
            and (user.has_perm(APPROVE_PERMISSION) or obj.proposed_by_id == user.pk),
            "approve_form": ApproveForm(),
            "reject_form": RejectForm(),
            "journal": [
                (entry, worded(journal_kind_label(entry.kind), entry.kind))
                for entry in obj.journal.all()
            ],
            "status_html": worded(adjustment_status_label(obj.status), obj.status),
            "refund_leg_html": leg_state_html(obj.refund_leg),
            "funding_leg_html": leg_state_html(obj.funding_leg),
            "escalation_html": escalation_html(obj.escalation),
            "reads": [
                (read, worded(provider_read_purpose_label(read.purpose), read.purpose))
                for read in obj.reads
            ],
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
                    request, f"Not proposed: {exc.message} (details: {exc.code})", messages.ERROR
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
            "leg_state_html": leg_state_html(leg),
            "escalation_html": escalation_html(escalation),
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
                    raise _FormError("Type the amount to confirm in dollars, e.g. 2.00 or $2.00.")
                adjustment_approve(
                    adjustment=adjustment,
                    actor=user,
                    confirmed_amount_micro=form.cleaned_data["confirmed_amount"],
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
            said = f"Not done: {exc.message}"
            typed = exc.details.get("confirmed") if isinstance(exc.details, dict) else None
            if exc.code == "adjustment_amount_mismatch" and isinstance(typed, int):
                said += f" You typed {dollars(typed)}; it is {dollars(adjustment.amount_micro)}."
            # The sentence for the person; the stable code stays, as details.
            self.message_user(request, f"{said} (details: {exc.code})", messages.ERROR)
        else:
            self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(self._change_url(adjustment))

    def _change_url(self, adjustment: Adjustment) -> str:
        return reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
