"""The ops staff's view of envelopes (SPEC §10): balances, funding legs, debits, the journal,
refund operations with each leg's outcome and verification verdict, the ledger check, and the
money each provider dispute moved (SPEC §18: held, exposure, charged back).

Everything is read-only: money moves only through `envelopes.services`, never by hand in the
admin. What this module adds is presentation: amounts in micro-dollars and in dollars, and the
rows of each envelope gathered on one page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.admin_base import AmountSearchAdmin, ReadOnlyAdmin, short_id, two_lines
from core.dashboard import stripe_link
from core.display import dollars
from core.links import id_link, register_id, register_referrer
from envelopes.admin.words import (
    balance_label,
    funding_status_label,
    journal_kind_label,
    refund_leg_words,
    refund_status_label,
    verification_status_label,
)
from envelopes.models import (
    Debit,
    DisputeFundsStatus,
    Envelope,
    FundingLeg,
    JournalEntry,
    RefundLeg,
    RefundOperation,
)
from envelopes.selectors import (
    Breach,
    envelope_timeline,
    envelopes_with_amount,
    envelopes_with_pending_funding,
    funding_legs_stuck,
    ledger_breaches,
    refund_legs_stuck,
    refund_status,
    refunds_with_amount,
    verification_status,
)
from envelopes.selectors.words import journal_note_words
from verification.admin import VERDICT_TONES, verdict_html, worded
from verification.models import Escalation
from verification.selectors import verdict_label

BALANCE_LABELS = (
    ("total_funded_micro", "Funded"),
    ("total_debited_micro", "Debited"),
    ("total_refunded_micro", "Refunded"),
    ("reserved_micro", "Reserved"),
    ("unspent_micro", "Unspent"),
    ("held_micro", "Held by dispute"),
    ("charged_back_micro", "Charged back"),
)
DELTAS = (
    "funded_delta",
    "debited_delta",
    "refunded_delta",
    "reserved_delta",
    "unspent_delta",
    "held_delta",
    "charged_back_delta",
)
FUNDS_TONES: dict[str, str] = {
    DisputeFundsStatus.HELD: "warn",
    DisputeFundsStatus.REINSTATED: "good",
    DisputeFundsStatus.CHARGED_BACK: "bad",
}
OUTCOME_TONES = {
    "accepted": "good",
    "refused": "bad",
    "void": "bad",
    "unknown": "warn",
    "reserved": "neutral",
}


def micro(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Amount:
    """One amount as the page shows it: micro-dollars and dollars."""

    micro: int

    @property
    def text(self) -> str:
        return micro(self.micro)

    @property
    def usd(self) -> str:
        return dollars(self.micro)


@dataclass(frozen=True)
class JournalRow:
    entry: JournalEntry
    deltas: list[Amount]
    link: str
    kind_html: SafeString | str = ""
    note_html: SafeString | str = ""


@dataclass(frozen=True)
class LegRow:
    leg: RefundLeg
    amount: Amount
    outcome_tone: str
    verdict: str
    verdict_tone: str
    run_url: str
    outcome_words: str = ""
    outcome_codes: str = ""
    verdict_html: SafeString | str = ""


@dataclass(frozen=True)
class RefundRow:
    operation: RefundOperation
    url: str
    status: str
    status_html: SafeString | str
    requested: Amount
    remainder: Amount
    legs: list[LegRow]


def _leg_rows(operation: RefundOperation) -> list[LegRow]:
    rows = []
    for leg in operation.legs.select_related("funding_leg", "verification_run").order_by(
        "sequence"
    ):
        run = leg.verification_run
        verdict = run.verdict if run is not None else ""
        if run is not None and run.verdict_class:
            verdict = f"{verdict} · {run.verdict_class}"
        rows.append(
            LegRow(
                leg=leg,
                amount=Amount(leg.amount_micro),
                outcome_tone=OUTCOME_TONES.get(leg.outcome, "neutral"),
                verdict=verdict,
                verdict_tone=VERDICT_TONES.get(run.verdict, "neutral") if run else "neutral",
                outcome_words=refund_leg_words(leg),
                outcome_codes=" · ".join(filter(None, (leg.outcome, leg.error_code))),
                verdict_html=verdict_html(
                    run.verdict,
                    run.verdict_class,
                    tone=VERDICT_TONES.get(run.verdict, "neutral"),
                )
                if run is not None
                else "",
                run_url=(
                    reverse("admin:verification_verificationrun_change", args=[run.pk])
                    if run is not None
                    else ""
                ),
            )
        )
    return rows


def refund_row(operation: RefundOperation) -> RefundRow:
    legs = _leg_rows(operation)
    status = refund_status([row.leg for row in legs])
    return RefundRow(
        operation=operation,
        url=reverse("admin:envelopes_refundoperation_change", args=[operation.pk]),
        status=status,
        status_html=worded(refund_status_label(status), status),
        requested=Amount(operation.requested_micro),
        remainder=Amount(operation.remainder_micro),
        legs=legs,
    )


def _journal_link(entry: JournalEntry) -> str:
    link = _journal_subject(entry)
    if entry.adjustment is not None:
        link = f"{link} · adjustment {entry.adjustment.public_id}".lstrip(" ·")
    if entry.dispute_funds is not None:
        link = f"{link} · dispute funds {entry.dispute_funds.public_id}".lstrip(" ·")
    if entry.provider_read is not None:  # the provider's word the entry rests on
        read = entry.provider_read
        link = f"{link} · provider read {read.public_id} (sha256 {read.sha256[:12]}…)"
    return link


def _journal_subject(entry: JournalEntry) -> str:
    if entry.refund_leg is not None:
        return f"refund leg {entry.refund_leg.public_id}"
    if entry.debit is not None:
        return f"debit {entry.debit.public_id}"
    if entry.funding_leg is not None:
        return f"funding {entry.funding_leg.public_id}"
    return ""


def envelope_page_context(envelope: Envelope) -> dict[str, Any]:
    entries = list(
        envelope.journal.select_related(
            "funding_leg", "debit", "refund_leg", "adjustment", "provider_read", "dispute_funds"
        ).order_by("id")
    )
    breaches: list[Breach] = ledger_breaches(Envelope.objects.filter(pk=envelope.pk))
    funding: list[FundingLeg] = list(envelope.funding_legs.order_by("sequence"))
    return {
        "envelope": envelope,
        "balances": [(label, Amount(getattr(envelope, name))) for name, label in BALANCE_LABELS],
        "funding_legs": [
            (
                leg,
                Amount(leg.amount_micro),
                Amount(leg.refunded_micro),
                Amount(leg.reserved_micro),
                Amount(leg.capacity_micro),
                Amount(leg.held_micro),
                Amount(leg.charged_back_micro),
                worded(funding_status_label(leg.status), leg.status),
            )
            for leg in funding
        ],
        "dispute_funds": [
            (
                funds,
                reverse("admin:envelopes_disputefunds_change", args=[funds.pk]),
                worded(funds.get_status_display(), funds.status),
            )
            for funds in envelope.dispute_funds.order_by("created_at", "id")
        ],
        "debits": [
            (debit, Amount(debit.amount_micro))
            for debit in envelope.debits.select_related("created_by").order_by("created_at", "id")
        ],
        "journal": [
            JournalRow(
                entry=entry,
                deltas=[Amount(getattr(entry, name)) for name in DELTAS],
                link=_journal_link(entry),
                kind_html=worded(journal_kind_label(entry.kind), entry.kind),
                note_html=worded(*journal_note_words(entry.note)),
            )
            for entry in entries
        ],
        "journal_totals": [Amount(sum(getattr(e, name) for e in entries)) for name in DELTAS],
        "refunds": [
            refund_row(operation)
            for operation in envelope.refunds.select_related("created_by").order_by(
                "-created_at", "-id"
            )
        ],
        "breaches": [
            (
                breach,
                Amount(breach.stored),
                Amount(breach.from_journal),
                Amount(breach.from_legs),
                worded(balance_label(breach.balance), breach.balance),
            )
            for breach in breaches
        ],
        "ledger_clean": not breaches,
    }


def _balance_column(name: str, label: str) -> Any:
    @admin.display(description=label.lower(), ordering=name)
    def column(self: Any, obj: Envelope) -> SafeString:
        # Dollars to read; the exact micro-dollars on hover (and on the envelope's page).
        value = getattr(obj, name)
        return format_html('<span title="{} micro">{}</span>', micro(value), dollars(value))

    return column


class StuckFilter(admin.SimpleListFilter):
    """Envelopes with a funding leg pending past `RECONCILIATION_STUCK_AFTER_S` (the console's
    count links here), or with any pending funding leg."""

    title = "funding"
    parameter_name = "stuck"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("funding", "Pending past the stuck threshold"), ("pending", "Any pending")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "funding":
            return queryset.filter(pk__in=funding_legs_stuck(now=timezone.now()).values("envelope"))
        if self.value() == "pending":
            return queryset.filter(pending_funding_micro__gt=0)
        return queryset


@admin.register(Envelope)
class EnvelopeAdmin(AmountSearchAdmin, ReadOnlyAdmin):
    list_display = (
        "envelope",
        "buyer",
        "funding",
        "total_funded",
        "unspent",
        "reserved",
        "total_refunded",
        "held",
        "charged_back",
        "created",
    )
    list_display_links = ("envelope",)
    list_select_related = ("owner",)
    list_filter = (StuckFilter,)
    # Provider ids match exactly (`=`): a charge, a PaymentIntent or a refund of the envelope.
    search_fields = (
        "public_id",
        "owner__username",
        "=owner__email",
        "=funding_legs__charge_id",
        "=funding_legs__payment_intent_id",
        "=refunds__legs__provider_refund_id",
    )
    search_help_text = (
        "Envelope id, buyer name or e-mail, charge (ch_…), PaymentIntent (pi_…) or refund (re_…) "
        "id, or an amount in dollars (12.50)."
    )
    date_hierarchy = "created_at"
    fields = ("public_id", "owner", "currency", "created_at")
    readonly_fields = fields
    change_form_template = "admin/envelopes/envelope/change_form.html"

    total_funded = _balance_column("total_funded_micro", "Funded")
    total_debited = _balance_column("total_debited_micro", "Debited")
    total_refunded = _balance_column("total_refunded_micro", "Refunded")
    reserved = _balance_column("reserved_micro", "Reserved")
    unspent = _balance_column("unspent_micro", "Unspent")
    held = _balance_column("held_micro", "Held by dispute")
    charged_back = _balance_column("charged_back_micro", "Charged back")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Envelope]:
        return envelopes_with_pending_funding(super().get_queryset(request))

    def rows_with_amount(self, queryset: QuerySet[Any], amount_micro: int) -> QuerySet[Any]:
        return queryset.filter(pk__in=envelopes_with_amount(amount_micro))

    @admin.display(description="envelope", ordering="public_id")
    def envelope(self, obj: Envelope) -> SafeString:
        return short_id(obj.public_id)

    @admin.display(description="buyer", ordering="owner__email")
    def buyer(self, obj: Envelope) -> SafeString:
        return format_html(
            '{}<span class="vouch-sub">{}</span>', obj.owner.get_username(), obj.owner.email
        )

    @admin.display(description="funding", ordering="pending_funding_micro")
    def funding(self, obj: Any) -> SafeString:
        """A pending funding charge is not money yet: say so, with how much waits."""
        pending = int(getattr(obj, "pending_funding_micro", 0) or 0)
        if pending:
            return format_html(
                '<span class="vouch-badge vouch-warn vouch-pending" title="A funding charge '
                'whose outcome is not known yet: not funded money">pending</span>'
                '<span class="vouch-sub">{} asked</span>',
                dollars(pending),
            )
        return mark_safe('<span class="vouch-badge vouch-good">funded</span>')

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Envelope) -> SafeString:
        return two_lines(obj.created_at)

    def page_context(self, request: HttpRequest, obj: Envelope | None) -> dict[str, Any]:
        if obj is None:
            return {}
        return {**envelope_page_context(obj), "timeline": envelope_timeline(obj)}


class StuckLegFilter(admin.SimpleListFilter):
    """Refunds with a leg reserved or unknown past `RECONCILIATION_STUCK_AFTER_S`."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "A leg stuck past the threshold")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(pk__in=refund_legs_stuck(now=timezone.now()).values("operation"))
        return queryset


@admin.register(RefundOperation)
class RefundOperationAdmin(AmountSearchAdmin, ReadOnlyAdmin):
    list_display = (
        "refund",
        "envelope_link",
        "amount",
        "status",
        "verdict",
        "provider_refunds",
        "created",
    )
    list_display_links = ("refund",)
    list_select_related = ("envelope", "envelope__owner", "created_by")
    list_filter = (StuckLegFilter,)
    search_fields = (
        "public_id",
        "envelope__public_id",
        "envelope__owner__username",
        "=envelope__owner__email",
        "=legs__provider_refund_id",
        "=legs__funding_leg__charge_id",
        "=legs__funding_leg__payment_intent_id",
    )
    search_help_text = (
        "Refund or envelope id, buyer name or e-mail, refund (re_…), charge (ch_…) or "
        "PaymentIntent (pi_…) id, or an amount in dollars (12.50)."
    )
    date_hierarchy = "created_at"
    fields = ("public_id", "envelope_id_link", "created_by", "created_at")
    readonly_fields = fields
    change_form_template = "admin/envelopes/refundoperation/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[RefundOperation]:
        return (
            super()
            .get_queryset(request)
            .prefetch_related(
                Prefetch(
                    "legs",
                    queryset=RefundLeg.objects.select_related("verification_run").order_by(
                        "sequence"
                    ),
                )
            )
        )

    def rows_with_amount(self, queryset: QuerySet[Any], amount_micro: int) -> QuerySet[Any]:
        return queryset.filter(pk__in=refunds_with_amount(amount_micro))

    @admin.display(description="refund", ordering="public_id")
    def refund(self, obj: RefundOperation) -> SafeString:
        return short_id(obj.public_id)

    @admin.display(description="envelope", ordering="envelope__public_id")
    def envelope_link(self, obj: RefundOperation) -> SafeString:
        url = reverse("admin:envelopes_envelope_change", args=[obj.envelope_id])
        return format_html(
            '<a href="{}">{}</a><span class="vouch-sub">{}</span>',
            url,
            short_id(obj.envelope.public_id),
            obj.envelope.owner.email or obj.envelope.owner.get_username(),
        )

    @admin.display(description="envelope")
    def envelope_id_link(self, obj: RefundOperation) -> SafeString | str:
        """On the refund's page: the envelope's whole id, linked to its page."""
        return id_link(obj.envelope.public_id)

    @admin.display(description="amount", ordering="requested_micro")
    def amount(self, obj: RefundOperation) -> SafeString:
        refunded = sum(leg.amount_micro for leg in obj.legs.all() if leg.outcome == "accepted")
        return format_html(
            '{}<span class="vouch-sub">requested&nbsp;{}</span>',
            dollars(refunded),
            dollars(obj.requested_micro),
        )

    @admin.display(description="status")
    def status(self, obj: RefundOperation) -> SafeString:
        text = refund_status(list(obj.legs.all()))
        tone = {"refunded": "good", "failed": "bad", "pending": "warn"}.get(text, "neutral")
        return format_html(
            '<span class="vouch-badge vouch-{}" title="{}">{}</span>',
            tone,
            text,
            refund_status_label(text),
        )

    @admin.display(description="verification")
    def verdict(self, obj: RefundOperation) -> SafeString:
        legs = list(obj.legs.all())
        text = verification_status(legs)
        tone = {"verified": "good", "attention": "bad", "pending": "warn"}.get(text, "neutral")
        verdicts = [
            verdict_label(leg.verification_run.verdict).lower()
            for leg in legs
            if leg.verification_run
        ]
        return format_html(
            '<span class="vouch-badge vouch-{}" title="{}">{}</span>{}',
            tone,
            text,
            verification_status_label(text),
            format_html('<span class="vouch-sub">{}</span>', ", ".join(verdicts))
            if verdicts
            else "",
        )

    @admin.display(description="Stripe refunds")
    def provider_refunds(self, obj: RefundOperation) -> SafeString:
        ids = [leg.provider_refund_id for leg in obj.legs.all() if leg.provider_refund_id]
        if not ids:
            return mark_safe('<span class="vouch-quiet">—</span>')
        return format_html_join(mark_safe("<br>"), "{}", ((stripe_link(i),) for i in ids))

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: RefundOperation) -> SafeString:
        return two_lines(obj.created_at)

    def page_context(self, request: HttpRequest, obj: RefundOperation | None) -> dict[str, Any]:
        return {"refund": refund_row(obj)} if obj is not None else {}


# --- where each envelope id leads (core.links): legs and debits are rows of their parent's page --


def _refund_leg_page(leg: RefundLeg) -> str:
    url = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    return f"{url}#leg-{leg.public_id}"


def _funding_leg_page(leg: FundingLeg) -> str:
    url = reverse("admin:envelopes_envelope_change", args=[leg.envelope_id])
    return f"{url}#funding-{leg.public_id}"


def _debit_page(debit: Debit) -> str:
    url = reverse("admin:envelopes_envelope_change", args=[debit.envelope_id])
    return f"{url}#debit-{debit.public_id}"


def _envelope_of_escalation(escalation: Escalation) -> list[tuple[str, str]]:
    """The envelope an escalation about one of its legs concerns."""
    found: list[str] = []
    if escalation.subject_type == "refund_leg":
        found = list(
            RefundLeg.objects.filter(public_id=escalation.subject_id).values_list(
                "operation__envelope__public_id", flat=True
            )[:1]
        )
    elif escalation.subject_type == "funding_leg":
        found = list(
            FundingLeg.objects.filter(public_id=escalation.subject_id).values_list(
                "envelope__public_id", flat=True
            )[:1]
        )
    return [("envelope", value) for value in found]


register_id("env_", "envelopes.Envelope")
register_id("erf_", "envelopes.RefundOperation")
register_id("rfl_", "envelopes.RefundLeg", page=_refund_leg_page)
register_id("fnd_", "envelopes.FundingLeg", page=_funding_leg_page)
register_id("dbt_", "envelopes.Debit", page=_debit_page)
register_id("dfu_", "envelopes.DisputeFunds")
register_referrer("verification.Escalation", _envelope_of_escalation)

# The money each provider dispute moved (SPEC §18): its own module (STYLE rule 16), registered here.
from envelopes.admin import dispute_funds  # noqa: E402, F401
